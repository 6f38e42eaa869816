"""Annotated videos written by `predict` and `track`: an .mp4 (MPEG-4 Part 2, `mp4v`) where that codec takes the
frame size, else a Motion-JPEG .avi beside it, which takes any size OpenCV reads (1x1, 8192x8192, 20000x16;
MPEG-4 needs sides from 2 to 8190 px). A frame rate below `MIN_FPS` (a stream's unknown rate, or a video read
with a huge `--vid-stride`) is written as `MIN_FPS`, which every container takes.

OpenCV's writer reports no failed write: `VideoOut.close` reads the finished file's header back, and a file
that does not open or holds no frame after frames were written (a full disk cuts an .mp4 before its index) is an
OSError naming it.
"""

from __future__ import annotations

import errno
import math
import os
from pathlib import Path

import cv2
import numpy as np

MIN_FPS = 1.0
CODECS = ((".mp4", "mp4v"), (".avi", "MJPG"))  # (suffix, FourCC), in order of preference


def open_video_writer(path: Path, fps: float | None, width: int, height: int) -> tuple[cv2.VideoWriter, Path]:
    """An opened writer of `width` x `height` frames at `fps` and the file it writes: `path` (an .mp4), or `path`
    with the suffix .avi when MPEG-4 cannot take the size. Raises OSError naming `path`, the size and the
    frame rate when no codec opens."""
    fps = fps if fps is not None and math.isfinite(fps) and fps >= MIN_FPS else MIN_FPS
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix, codec in CODECS:
        target = path.with_suffix(suffix)
        writer = cv2.VideoWriter(str(target), cv2.VideoWriter_fourcc(*codec), fps, (width, height))
        if writer.isOpened():
            return writer, target
        writer.release()
        if target.is_file() and not target.stat().st_size:  # what a refused writer leaves
            target.unlink()
    tried = ", ".join(f"{codec} {suffix}" for suffix, codec in CODECS)
    raise OSError(f"{path}: no video codec here writes {width}x{height} frames at {fps:g} fps (tried {tried})")


class VideoOut:
    """An annotated video being written (`open_video_writer`): `write` each uint8 BGR frame, then `close`, which
    checks that the file holds frames; `path` is the file written."""

    def __init__(self, path: Path, fps: float | None, width: int, height: int) -> None:
        self.writer, self.path = open_video_writer(path, fps, width, height)
        self.frames = 0

    def write(self, image: np.ndarray) -> None:
        self.writer.write(image)
        self.frames += 1

    def close(self) -> None:
        """Finish the file. OSError naming it (no space left, or an I/O error) when it does not read back."""
        self.writer.release()
        capture = cv2.VideoCapture(str(self.path))
        readable = capture.isOpened() and capture.get(cv2.CAP_PROP_FRAME_COUNT) > 0
        capture.release()
        if self.frames and not readable:
            stats = os.statvfs(self.path.parent)
            full = stats.f_bavail * stats.f_frsize < 1 << 20
            code = errno.ENOSPC if full else errno.EIO
            raise OSError(code, os.strerror(code), str(self.path))

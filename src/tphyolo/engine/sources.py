"""Inference sources: an image file, a folder, a glob pattern, a .txt list of files, or a video file.

`resolve_source(source)` lists the files a source names (images and videos, in a stable order);
`iter_frames(files)` decodes them one frame at a time as uint8 BGR (H, W, 3) arrays.
"""

from __future__ import annotations

import glob
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from tphyolo.data.image_io import is_image_name, read_image

VIDEO_SUFFIXES = frozenset({".mp4", ".avi", ".mov", ".mkv", ".m4v", ".mpeg", ".mpg", ".wmv", ".webm", ".asf"})


@dataclass(frozen=True)
class Frame:
    """One decoded image: `image` uint8 BGR (H, W, 3); `path` the file it came from; `index` the frame number
    in a video (0 for an image); `fps` the video's frame rate (None for an image)."""

    image: np.ndarray
    path: Path
    index: int = 0
    fps: float | None = None

    @property
    def is_video(self) -> bool:
        return self.fps is not None


def is_video_name(path: Path) -> bool:
    return path.suffix.lower() in VIDEO_SUFFIXES


def _media_in(paths: Sequence[Path]) -> list[Path]:
    return sorted(p for p in paths if p.is_file() and (is_image_name(p) or is_video_name(p)))


def _once_each(paths: Sequence[Path]) -> list[Path]:
    """One path per file: of the paths reaching the same file through symlinked folders (a `**` glob follows a
    link back up the tree many times over), the shortest."""
    shortest: dict[str, Path] = {}
    for path in paths:
        key = str(path.resolve())
        if key not in shortest or (len(path.parts), str(path)) < (len(shortest[key].parts), str(shortest[key])):
            shortest[key] = path
    return list(shortest.values())


def _from_list(path: Path) -> list[Path]:
    files = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        p = Path(line).expanduser()
        p = p if p.is_absolute() else path.parent / p
        if not p.is_file():
            raise FileNotFoundError(f"{path}:{n}: listed file {p} does not exist")
        if not (is_image_name(p) or is_video_name(p)):
            raise ValueError(f"{path}:{n}: {p} is not an image or video file")
        files.append(p)
    return files


def resolve_source(source: str | Path | Sequence[str | Path]) -> list[Path]:
    """The image and video files named by `source` (or by each entry of a sequence), in order.

    A folder gives its images and videos (not recursive, sorted by name); a pattern with `*`, `?` or `[`
    is a glob (recursive with `**`); a `.txt` file lists one path per line (relative to the list's folder,
    `#` comments allowed). Raises FileNotFoundError or ValueError naming the source when it yields nothing
    usable.
    """
    if isinstance(source, (list, tuple)):
        return [f for s in source for f in resolve_source(s)]
    text = str(source)
    if any(ch in text for ch in "*?["):
        files = _media_in(_once_each([Path(p) for p in glob.glob(text, recursive=True)]))
        if not files:
            raise FileNotFoundError(f"source {text!r}: the pattern matches no image or video file")
        return files
    path = Path(text).expanduser()
    if path.is_dir():
        files = _media_in(list(path.iterdir()))
        if not files:
            raise FileNotFoundError(f"source {path}: the folder holds no image or video file")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"source {path}: no such file or folder")
    if path.suffix.lower() == ".txt":
        files = _from_list(path)
        if not files:
            raise ValueError(f"source {path}: the list names no file")
        return files
    if is_image_name(path) or is_video_name(path):
        return [path]
    raise ValueError(f"source {path}: not an image, a video, a folder, a glob or a .txt list")


def count_frames(files: Sequence[Path]) -> int:
    """Frames `iter_frames(files)` will yield (a video's count as its container reports it)."""
    total = 0
    for f in files:
        if is_video_name(f):
            capture = cv2.VideoCapture(str(f))
            total += max(int(capture.get(cv2.CAP_PROP_FRAME_COUNT)), 0)
            capture.release()
        else:
            total += 1
    return total


def iter_frames(files: Sequence[Path]) -> Iterator[Frame]:
    """Decode `files` in order: an image gives one Frame, a video one Frame per decoded frame."""
    for f in files:
        if not is_video_name(f):
            yield Frame(read_image(f), f)
            continue
        capture = cv2.VideoCapture(str(f))
        if not capture.isOpened():
            raise ValueError(f"{f}: cannot open video")
        fps = capture.get(cv2.CAP_PROP_FPS) or 30.0
        try:
            index = 0
            while True:
                ok, image = capture.read()
                if not ok:
                    break
                yield Frame(image, f, index, fps)
                index += 1
        finally:
            capture.release()
        if index == 0:
            raise ValueError(f"{f}: the video has no decodable frame")

"""Valid videos of odd sizes are predicted and tracked, their annotated videos written with a codec that takes
the size (an .mp4 where MPEG-4 can, else a Motion-JPEG .avi): 1x1 frames, a 20000x16 strip (tracked with camera
motion compensation, which scales it to 960x1), an 8192x8192 frame (slow), and `--vid-stride 10^9` (one frame,
written at 1 fps). The videos are generated here."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from tests.helpers import exit_code

CPU = ["--device", "cpu", "--img", "64"]


def mjpg_video(path: Path, width: int, height: int, frames: int = 2) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (width, height))
    assert writer.isOpened()
    rng = np.random.default_rng(0)
    for _ in range(frames):
        writer.write(rng.integers(0, 255, (height, width, 3), dtype=np.uint8))
    writer.release()
    return path


def written_frames(folder: Path, stem: str) -> tuple[str, tuple[int, int], int]:
    """(file name, (h, w), frame count) of the one annotated video named `stem` in `folder`."""
    (path,) = [p for p in folder.iterdir() if p.stem == stem and p.suffix in (".mp4", ".avi")]
    capture = cv2.VideoCapture(str(path))
    shapes = []
    while True:
        ok, image = capture.read()
        if not ok:
            break
        shapes.append(image.shape[:2])
    capture.release()
    return path.name, shapes[0], len(shapes)


@pytest.mark.parametrize(
    ("size", "expected"),
    [((1, 1), "v.avi"), ((20000, 16), "v.avi"), pytest.param((8192, 8192), "v.avi", marks=pytest.mark.slow)],
)
def test_predict_writes_videos_of_any_size(size, expected, weights, tmp_path):
    video = mjpg_video(tmp_path / "v.avi", *size)
    argv = ["predict", "--weights", str(weights), "--source", str(video), *CPU, "--project", str(tmp_path / "r")]
    assert exit_code([*argv, "--name", "p"]) == 0
    assert written_frames(tmp_path / "r" / "p", "v") == (expected, (size[1], size[0]), 2)


def test_track_follows_a_very_wide_video_with_camera_motion(weights, tmp_path, capsys):
    video = mjpg_video(tmp_path / "wide.avi", 20000, 16, frames=3)
    argv = ["track", "--weights", str(weights), "--source", str(video), "--tracker", "botsort", *CPU]
    assert exit_code([*argv, "--project", str(tmp_path / "r"), "--name", "t"]) == 0
    assert "3 frames tracked" in capsys.readouterr().out
    assert written_frames(tmp_path / "r" / "t", "wide") == ("wide.avi", (16, 20000), 3)


def test_a_huge_vid_stride_writes_the_first_frame(weights, tmp_path):
    video = mjpg_video(tmp_path / "v.avi", 64, 48, frames=3)
    argv = ["predict", "--weights", str(weights), "--source", str(video), "--vid-stride", str(10**9), *CPU]
    assert exit_code([*argv, "--project", str(tmp_path / "r"), "--name", "p"]) == 0
    assert written_frames(tmp_path / "r" / "p", "v") == ("v.mp4", (48, 64), 1)

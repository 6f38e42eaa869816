"""A source that yields no frame (a zero-byte, header-only, random or text file named .mp4, an unreachable
rtsp:// URL, a missing webcam index) is an error naming it, exit 1, in `track` and `predict`; beside a source
that yields frames it is a warning naming it, and the run goes on (exit 0). The files are generated here."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from tests.helpers import exit_code
from tests.reliability.corpus import jpeg_bytes

CPU = ["--device", "cpu", "--img", "64"]


def video_bytes(frames: int = 3, size: tuple[int, int] = (48, 64)) -> bytes:
    """An MJPG .avi of `frames` frames (h, w = `size`), written by OpenCV."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "v.avi")
        writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 5, size[::-1])
        for k in range(frames):
            writer.write(np.full((*size, 3), 40 * k, np.uint8))
        writer.release()
        return Path(path).read_bytes()


def frameless_source(kind: str, folder: Path) -> str:
    """A source of `kind` that opens or names something, but yields no frame."""
    files = {
        "zero_bytes": b"",
        "header_only": video_bytes()[:200],
        "random_bytes": np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes(),
        "text": b"not a video\n" * 100,
    }
    if kind in files:
        path = folder / f"{kind}.mp4"
        path.write_bytes(files[kind])
        return str(path)
    return {"rtsp": "rtsp://127.0.0.1:9/nothing", "webcam": "63"}[kind]  # port 9 refuses; no /dev/video63


SLOW = pytest.mark.slow


def _cases() -> list:
    """(command, kind) pairs: predict with every kind; track, which reads sources as predict does, with one kind
    in the fast lane and the others slow."""
    cases = []
    for kind in ("zero_bytes", "header_only", "random_bytes", "text", "rtsp", "webcam"):
        slow = kind in ("header_only", "random_bytes")  # FFmpeg probes these bytes for seconds
        cases.append(pytest.param("predict", kind, marks=[SLOW] if slow else []))
        cases.append(pytest.param("track", kind, marks=[SLOW] if kind != "zero_bytes" else []))
    return cases


@pytest.mark.parametrize(("command", "kind"), _cases())
def test_a_source_without_frames_is_an_error_naming_it(command, kind, weights, tmp_path, capsys):
    source = frameless_source(kind, tmp_path)
    argv = [command, "--weights", str(weights), "--source", source, *CPU, "--project", str(tmp_path / "runs")]
    assert exit_code(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith(f"tphyolo {command}: error: ")]
    assert len(errors) == 1 and source in errors[0], err


@pytest.mark.parametrize("command", ["track", "predict"])
def test_a_source_without_frames_beside_good_ones_is_a_warning(command, weights, tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "good.avi").write_bytes(video_bytes())
    (tmp_path / "src" / "bad.mp4").write_bytes(b"")
    argv = [command, "--weights", str(weights), "--source", str(tmp_path / "src"), *CPU]
    assert exit_code([*argv, "--project", str(tmp_path / "runs")]) == 0
    captured = capsys.readouterr()
    assert "error" not in captured.err and str(tmp_path / "src" / "bad.mp4") in captured.err
    if command == "track":
        assert "3 frames tracked" in captured.out
    else:
        assert "in 1 file(s), 1 skipped" in captured.out


def test_an_image_source_is_unchanged(weights, tmp_path, capsys):
    """The oracle of the counts above: one good image, one frame."""
    (tmp_path / "a.jpg").write_bytes(jpeg_bytes(0))
    argv = ["track", "--weights", str(weights), "--source", str(tmp_path / "a.jpg"), *CPU]
    assert exit_code([*argv, "--project", str(tmp_path / "runs")]) == 0
    assert "1 frames tracked" in capsys.readouterr().out

"""A write that fails (no space left) is one line naming the file, exit 2, and leaves the previous version of
the file whole with nothing half-written beside it: `export` onto a good earlier export in a filesystem too
small for the new one (a tmpfs of 256 KB, mounted by the test when it may, else skipped), and the same fault
injected into the write path where no filesystem can be mounted."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
from tests.helpers import exit_code, one_error_line


@pytest.fixture
def small_disk(tmp_path) -> Path:
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def _refused_keeping_the_earlier_file(weights: Path, folder: Path, capsys) -> None:
    """Export over a good earlier file in `folder`: one line naming it, the file as it was, nothing beside it."""
    earlier = folder / f"{weights.stem}.onnx"
    earlier.write_bytes(b"an earlier good export")
    argv = ["export", "--weights", str(weights), "--format", "onnx", "--img", "64", "--out", str(earlier)]
    assert exit_code(argv) == 2
    line = one_error_line(capsys.readouterr().err, "export")
    assert str(earlier) in line and "no space left on device" in line
    assert earlier.read_bytes() == b"an earlier good export" and os.listdir(folder) == [earlier.name]


@pytest.mark.slow
def test_export_onto_a_full_disk_names_the_file_and_keeps_the_old_one(weights, small_disk, capsys):
    _refused_keeping_the_earlier_file(weights, small_disk, capsys)


def test_a_failed_export_write_keeps_the_old_file(weights, tmp_path, monkeypatch, capsys):
    """Where no filesystem can be mounted: the trace writes half a file, then the disk is full."""
    import torch

    def half_then_full(model, args, path, **kwargs):
        Path(path).write_bytes(b"half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch.onnx, "export", half_then_full)
    _refused_keeping_the_earlier_file(weights, tmp_path, capsys)


def test_track_onto_a_full_disk_names_the_video(weights, small_disk, tmp_path, capsys):
    """OpenCV's video writer reports no failed write: the finished file is read back (a full disk cuts an .mp4
    before its index)."""
    import cv2
    import numpy as np

    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10, (256, 256))
    rng = np.random.default_rng(0)
    for _ in range(12):  # about 40 KB a frame drawn: over the disk's 256 KB
        writer.write(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8))
    writer.release()
    argv = ["track", "--weights", str(weights), "--source", str(video), "--img", "64", "--device", "cpu"]
    assert exit_code([*argv, "--project", str(small_disk), "--name", "t"]) == 2
    line = one_error_line(capsys.readouterr().err, "track")
    assert str(small_disk / "t" / "clip.mp4") in line and "no space left on device" in line

"""Fault injection: long-running commands killed with SIGKILL at a seeded random step, then resumed or run again.
Nothing finished is lost or corrupted, nothing half-written is taken as finished. Each command runs in its own
process (`python -m tphyolo`), with a tiny model on a few small images.

- `predict --save-json`, killed after a seeded number of finished units (journal lines): `--resume` gives the
  files and predictions.json of an uninterrupted run.
- `export` over a good earlier .onnx, killed once it writes the new one: the earlier file is whole and loads;
  the run again gives a file that loads.
- `track`, killed a seeded moment after its first drawn frame, then run again into the same folder: the MOT file is
  the uninterrupted run's.
- `train`, killed once a seeded epoch's row is in results.csv: `--resume` ends with the uninterrupted run's
  rows and weights, bit for bit.
- `val --report`, killed a seeded moment after its folder appears: no half-written JSON; run again, its
  evaluation.json and report.json are the uninterrupted run's (timings aside).

Not here: `export --int8` (its quantizer writes through the same atomic files as `export`) and `tune` (Ray).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
from tests.reliability.corpus import jpeg_bytes

pytestmark = pytest.mark.slow
SEED = 36
LIMIT_S = 120


def _command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "tphyolo", *argv]


def _environment() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return os.environ | {"PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(_command(*argv), env=_environment(), capture_output=True, text=True, timeout=LIMIT_S)
    assert done.returncode == 0, done.stderr
    return done


def _kill_when(argv: list[str], ready: Callable[[], bool]) -> None:
    """Start `tphyolo ARGV` and SIGKILL it as soon as `ready()` (polled every 10 ms); fails the test when it
    ends first or when `LIMIT_S` passes."""
    process = subprocess.Popen(_command(*argv), env=_environment(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + LIMIT_S
    try:
        while not ready():
            assert process.poll() is None, "the command ended before the fault"
            assert time.monotonic() < deadline, "the fault's moment never came"
            time.sleep(0.01)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_predict_killed_then_resumed_equals_an_uninterrupted_run(weights, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for i in range(6):
        (source / f"{i}.jpg").write_bytes(jpeg_bytes(i, (64, 80)))
    argv = ["predict", "--weights", str(weights), "--source", str(source), "--img", "64", "--conf", "0.001",
            "--save-json", "--save-txt", "--device", "cpu", "--project", str(tmp_path)]  # fmt: skip
    _run([*argv, "--name", "whole"])
    finished = random.Random(SEED).randint(1, 4)  # units finished before the fault
    journal = tmp_path / "cut" / ".journal" / "rank0.jsonl"
    _kill_when([*argv, "--name", "cut"], lambda: journal.is_file() and journal.read_text().count("\n") >= finished)
    resumed = _run(["predict", "--resume", str(tmp_path / "cut"), "--device", "cpu"])
    assert "finished before" in resumed.stdout
    whole, cut = _tree(tmp_path / "whole"), _tree(tmp_path / "cut")
    for tree in (whole, cut):
        tree.pop("args.yaml"), [tree.pop(k) for k in list(tree) if k.startswith(".journal")]
    assert json.loads(cut.pop("predictions.json")) == json.loads(whole.pop("predictions.json"))
    assert cut == whole  # labels and drawn images, each whole


def test_export_killed_while_writing_keeps_the_earlier_file(weights, tmp_path):
    from tphyolo.infer.backends import load_backend

    out = tmp_path / "m.onnx"
    argv = ["export", "--weights", str(weights), "--format", "onnx", "--img", "64", "--out", str(out)]
    _run(argv)
    earlier = out.read_bytes()
    delay = random.Random(SEED).uniform(0.0, 0.2)  # into the trace's writing
    started: list[float] = []

    def writing() -> bool:
        if not started and any(p.name.startswith(".m.") for p in tmp_path.iterdir()):
            started.append(time.monotonic())
        return bool(started) and time.monotonic() - started[0] >= delay

    _kill_when(argv, writing)
    assert out.read_bytes() == earlier and load_backend(out).names == ["a", "b"]
    _run(argv)  # again: a whole new file
    assert load_backend(out).names == ["a", "b"]


def test_track_killed_then_run_again_equals_an_uninterrupted_run(weights, tmp_path):
    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10, (96, 64))
    rng = np.random.default_rng(SEED)
    for _ in range(60):
        writer.write(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8))
    writer.release()
    argv = ["track", "--weights", str(weights), "--source", str(video), "--img", "64", "--conf", "0.001",
            "--save-mot", "--device", "cpu", "--project", str(tmp_path)]  # fmt: skip
    _run([*argv, "--name", "whole"])
    delay = random.Random(SEED).uniform(0.0, 0.3)  # after the first frame is drawn, well before the 60th
    drawn = tmp_path / "cut" / "clip.mp4"
    started: list[float] = []

    def tracking() -> bool:
        if not started and drawn.is_file():
            started.append(time.monotonic())
        return bool(started) and time.monotonic() - started[0] >= delay

    _kill_when([*argv, "--name", "cut"], tracking)
    assert not (tmp_path / "cut" / "mot" / "clip.txt").exists()  # nothing half-written stands as finished
    _run([*argv, "--name", "cut", "--exist-ok"])
    mot = "mot/clip.txt"
    assert (tmp_path / "cut" / mot).read_text() == (tmp_path / "whole" / mot).read_text()


def test_train_killed_then_resumed_equals_an_uninterrupted_run(tiny_synthetic, tmp_path):
    """Killed once a seeded epoch's row is in results.csv (its checkpoint being written, or the next epoch
    running), `train --resume` ends with the uninterrupted run's epochs, losses and weights."""
    import torch

    from tphyolo.checkpoint.format import load_checkpoint

    argv = ["train", "--data", str(tiny_synthetic), "--model", "yolov5n", "--img", "64", "--batch", "4",
            "--epochs", "4", "--workers", "0", "--noval", "--no-plots", "--noautoanchor", "--seed", "0",
            "--device", "cpu", "--project", str(tmp_path)]  # fmt: skip
    _run([*argv, "--name", "whole"])
    epoch = random.Random(SEED).randint(1, 2)  # epoch 0's last.pt is saved before epoch 1's row
    results = tmp_path / "cut" / "results.csv"
    _kill_when([*argv, "--name", "cut"], lambda: results.is_file() and results.read_text().count("\n") >= epoch + 2)
    _run(["train", "--resume", str(tmp_path / "cut" / "weights" / "last.pt"), "--device", "cpu"])
    rows = [(tmp_path / name / "results.csv").read_text().splitlines() for name in ("whole", "cut")]
    assert len(rows[0]) == 5 and [r.split(",")[:5] for r in rows[1]] == [r.split(",")[:5] for r in rows[0]]
    final = [load_checkpoint(tmp_path / name / "weights" / "last.pt").model for name in ("whole", "cut")]
    assert all(torch.equal(value, final[1][key]) for key, value in final[0].items())


def test_val_report_killed_then_run_again_equals_an_uninterrupted_run(weights, tmp_path):
    """Killed a seeded moment after its run folder appears, `val --report` leaves no half-written report, and
    run again into the same folder writes the uninterrupted run's evaluation.json and report.json."""
    from tests.reliability.corpus import write_dataset

    write_dataset(tmp_path / "data", good=6)
    argv = ["val", "--weights", str(weights), "--data", str(tmp_path / "data" / "data.yaml"), "--img", "64",
            "--report", "--no-scan-cache", "--device", "cpu", "--project", str(tmp_path)]  # fmt: skip
    _run([*argv, "--name", "whole"])
    delay = random.Random(SEED).uniform(0.0, 1.0)
    folder, started = tmp_path / "cut", []

    def validating() -> bool:
        if not started and folder.is_dir():
            started.append(time.monotonic())
        return bool(started) and time.monotonic() - started[0] >= delay

    _kill_when([*argv, "--name", "cut"], validating)
    for name in ("report.json", "evaluation.json", "report.html"):  # whole or absent
        if (folder / name).is_file() and name.endswith(".json"):
            json.loads((folder / name).read_text())
    _run([*argv, "--name", "cut", "--exist-ok"])
    for name in ("report.json", "evaluation.json"):
        cut, whole = (json.loads((f / name).read_text()) for f in (folder, tmp_path / "whole"))
        cut.pop("speed", None), whole.pop("speed", None)  # timings: the only numbers a rerun may change
        assert cut == whole, name

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
- `export --int8` over an earlier file, killed a seeded moment into calibration and quantization, and again the
  moment its path changes: what stands at the path is the earlier file or the finished INT8 file with its
  accuracy check in the metadata; run again, the uninterrupted run's file.
- `tune`, killed during its first trial and again as a trial ends, each time resumed: trials.csv reads at every
  point, no trial is lost or counted twice, and the search ends with its trials and best_hyp.yaml. (A resumed
  search runs an interrupted trial anew under a new number, so it is not compared with an uninterrupted one.)
"""

from __future__ import annotations

import contextlib
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
TUNE_LIMIT_S = 600  # a search starts a Ray cluster (30 s on a loaded 2-core machine) and a process per trial


def _command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "tphyolo", *argv]


def _environment() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return os.environ | {"PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}


def _run(argv: list[str], *, code: int = 0, limit_s: float = LIMIT_S) -> subprocess.CompletedProcess:
    done = subprocess.run(_command(*argv), env=_environment(), capture_output=True, text=True, timeout=limit_s)
    assert done.returncode == code, done.stderr
    return done


def _kill_when(argv: list[str], ready: Callable[[], bool], *, group: bool = False, limit_s: float = LIMIT_S) -> None:
    """Start `tphyolo ARGV` and SIGKILL it as soon as `ready()` (polled every 10 ms); fails the test when it
    ends first or when `limit_s` passes. `group`: for a command that starts a Ray cluster, the command's process
    is killed first (the fault), then the processes Ray started (its session), before the next run."""
    process = subprocess.Popen(_command(*argv), env=_environment(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=group)  # fmt: skip
    deadline = time.monotonic() + limit_s
    try:
        while not ready():
            assert process.poll() is None, "the command ended before the fault"
            assert time.monotonic() < deadline, "the fault's moment never came"
            time.sleep(0.01)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        if group:
            time.sleep(1.0)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


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


def test_int8_export_killed_keeps_the_earlier_file_or_a_checked_one(weights, tmp_path):
    """An INT8 file's metadata is final only after its accuracy check: killed before that, the earlier file at
    the path stays; killed as the path changes, the file there carries the check (the untrained model's check
    says nothing, so the command exits 1 and marks the file unchecked, with the check's numbers)."""
    from tests.reliability.corpus import write_dataset

    from tphyolo.infer.backends import load_backend

    write_dataset(tmp_path / "data", good=4)
    out = tmp_path / "m_int8.onnx"
    argv = ["export", "--weights", str(weights), "--format", "onnx", "--int8", "--data",
            str(tmp_path / "data" / "data.yaml"), "--img", "64", "--calib-images", "4", "--device", "cpu"]  # fmt: skip
    _run([*argv, "--out", str(tmp_path / "whole.onnx")], code=1)
    whole = load_backend(tmp_path / "whole.onnx").metadata
    assert whole.int8 and whole.int8_check and len(whole.int8_map50) == 2  # what a finished file carries
    _run(["export", "--weights", str(weights), "--format", "onnx", "--img", "64", "--out", str(out)])
    earlier = out.read_bytes()  # a float file, told apart from any INT8 one by its bytes

    def standing() -> None:
        """The earlier file, or a whole INT8 file with the uninterrupted run's metadata."""
        if out.read_bytes() != earlier:
            assert load_backend(out).metadata == whole

    delay = random.Random(SEED).uniform(0.0, 0.5)  # into calibration, quantization or the check
    started: list[float] = []

    def quantizing() -> bool:
        if not started and any(p.name.startswith(".m_int8.") for p in tmp_path.iterdir()):
            started.append(time.monotonic())
        return bool(started) and time.monotonic() - started[0] >= delay

    _kill_when([*argv, "--out", str(out)], quantizing)
    standing()
    assert out.read_bytes() == earlier  # killed well before the end
    inode = out.stat().st_ino
    _kill_when([*argv, "--out", str(out)], lambda: out.stat().st_ino != inode)  # as soon as the path changes
    standing()
    _run([*argv, "--out", str(out)], code=1)  # again: the uninterrupted run's file, nothing left beside it
    assert load_backend(out).metadata == whole
    assert out.read_bytes() == (tmp_path / "whole.onnx").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "m_int8.onnx", "whole.onnx"]


def test_tune_killed_during_and_between_trials_then_resumed(tiny_synthetic, tmp_path):
    """Killed during trial 1 (after its first epoch), resumed, killed again as a trial ends, resumed: trials.csv
    reads at every point, finished trials stay as they were, the interrupted one stays marked and is not
    counted, the search ends with --trials counted trials, each number once, and best_hyp.yaml is the best
    row's hyp."""
    from tphyolo.training.hyp import train_hyp
    from tphyolo.training.tune.trials import COUNTED, read_trials

    run_dir = tmp_path / "s"
    table = run_dir / "trials.csv"
    argv = ["tune", "--data", str(tiny_synthetic), "--model", "yolov5n", "--img", "64", "--batch", "4",
            "--epochs", "2", "--trials", "2", "--cpus-per-trial", "2", "--workers", "0", "--no-plots", "--noautoanchor",
            "--device", "cpu", "--project", str(tmp_path), "--name", "s"]  # fmt: skip
    resume = ["tune", "--resume", str(run_dir), "--device", "cpu"]
    ray_session = {"group": True, "limit_s": TUNE_LIMIT_S}  # its processes killed too, after the command

    def rows() -> list:
        return read_trials(table) if table.is_file() else []

    _kill_when(argv, lambda: any(r.state == "running" and r.epochs >= 1 for r in rows()), **ray_session)
    first = rows()
    assert [r.state for r in first] == ["running"] and not (run_dir / "best_hyp.yaml").exists()
    ended = random.Random(SEED).randint(1, 2)  # counted trials before the second fault
    _kill_when(resume, lambda: sum(r.state in COUNTED for r in rows()) >= ended, **ray_session)
    second = rows()
    assert second[0].trial == 1 and second[0].state == "interrupted" and second[0].hyp == first[0].hyp
    done = _run(resume, limit_s=TUNE_LIMIT_S)
    final = rows()
    numbers = [r.trial for r in final]
    assert numbers == sorted(set(numbers)) and numbers[0] == 1  # each trial once, none lost
    counted = [r for r in final if r.state in COUNTED]
    assert len(counted) == 2 and {r.state for r in final} <= {"done", "interrupted"} and final[0] == second[0]
    assert [r for r in second if r.state in COUNTED] == counted[: len([r for r in second if r.state in COUNTED])]
    for row in counted:  # each trained its epochs, once each, in its own folder
        results = (run_dir / "trials" / f"trial{row.trial}" / "results.csv").read_text().splitlines()
        assert row.epochs == 2 and len(results) == 3, (row, results)
    best = max(counted, key=lambda r: r.fitness)
    assert train_hyp(run_dir / "best_hyp.yaml") == dict(best.hyp) and "best: trial" in done.stdout
    assert not [p.name for p in run_dir.iterdir() if p.name.startswith(".")]  # nothing half-written beside

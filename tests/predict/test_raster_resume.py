"""An orthomosaic prediction stopped part-way and resumed, in one process or shared by torchrun ranks, ends with
the outputs of one uninterrupted process, byte for byte: rows of tiles journaled before the stop are not run
again, a row whose journal line was cut short is, and objects on the seam between a journaled row and a row run
after the resume are merged into one box."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import pytest
import torch
from tests.infer.block_finder import BlockFinder
from tests.predict.geotiffs import random_checkpoint, scene, write_geotiff
from tests.torchrun import REPO, same_files, same_settings, torchrun

from tphyolo.cli import main
from tphyolo.infer.slicing import SliceConfig
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.raster import RasterCallbacks, RasterOutputs, predict_raster_into
from tphyolo.predict.runner.journal import JOURNAL_DIR

# 700 x 800 px, NoData in the first 260 columns. 256 px tiles, overlap 0.25: x 0 (NoData), 192, 384, 544 and
# rows at y 0, 192, 384, 444. The red block lies across the seam of rows 0 and 1 (and of two columns); the green
# one across that of rows 2 and 3.
BLOCKS = [(300, 150, 430, 230, 0), (600, 420, 650, 500, 1)]
TRUTH = torch.tensor([b[:4] for b in BLOCKS], dtype=torch.float32)
SLICES = SliceConfig(256, 0.25)
OUTPUTS = RasterOutputs(save_geojson=True, save_txt=True, save_conf=True, save_json=True)
BOOKKEEPING = (JOURNAL_DIR, "args.yaml")  # args.yaml: `same_settings`


class Stop(Exception):
    """The fault that interrupts a run."""


@pytest.fixture(scope="module")
def ortho(tmp_path_factory) -> Path:
    return write_geotiff(tmp_path_factory.mktemp("geo") / "ortho.tif", scene(700, 800, BLOCKS, border=260))


def _predictor(*, stop_at: int | None = None) -> tuple[Predictor, list[int]]:
    """A BlockFinder Predictor in batches of 2 (each row: 3 tiles run, 2 calls), and the list its calls are
    counted in; with `stop_at`, that call raises Stop."""
    predictor = Predictor(BlockFinder(), imgsz=256, conf=0.1, device="cpu", batch=2, merge="greedy-nmm",
                          match="ios")  # fmt: skip
    calls: list[int] = []
    predict_images = predictor.predict_images

    def counted(images):
        calls.append(len(images))
        if len(calls) == stop_at:
            raise Stop
        return predict_images(images)

    predictor.predict_images = counted  # a test double: the run is the code under test
    return predictor, calls


def _run(save_dir: Path, ortho: Path, predictor: Predictor, *, resume: bool = False, notes=None):
    save_dir.mkdir(exist_ok=True)
    return predict_raster_into(save_dir, predictor, ortho, slicing=SLICES, outputs=OUTPUTS, resume=resume,
                               calls=RasterCallbacks(on_note=None if notes is None else notes.append))  # fmt: skip


def _sorted_boxes(run):
    return run.detections.boxes[run.detections.boxes[:, 0].argsort()]


def test_a_resumed_raster_run_writes_what_an_uninterrupted_one_writes(ortho, tmp_path):
    predictor, calls = _predictor()
    whole = _run(tmp_path / "one", ortho, predictor)
    assert (whole.rows, whole.tiles, whole.skipped, len(calls)) == (4, 16, 4, 8)
    torch.testing.assert_close(_sorted_boxes(whole), TRUTH, atol=1.0, rtol=0)  # each merged across its seam

    predictor, calls = _predictor(stop_at=3)  # rows 0 and 1 done, stopped in row 2
    with pytest.raises(Stop):
        _run(tmp_path / "two", ortho, predictor)
    journal = tmp_path / "two" / JOURNAL_DIR / "rank0.jsonl"
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 and not (tmp_path / "two" / "ortho.geojson").exists()  # row 1 stopped before its line
    journal.write_text(lines[0] + "\n" + lines[0] + "\n")  # one line twice: counts once
    resumed_predictor, calls = _predictor()
    resumed = _run(tmp_path / "two", ortho, resumed_predictor, resume=True)
    assert (resumed.rows_before, len(calls)) == (1, 6)  # rows 1, 2 and 3 run: the red block's seam spans the stop
    assert (resumed.tiles, resumed.skipped) == (whole.tiles, whole.skipped)
    assert torch.equal(resumed.detections.rows(), whole.detections.rows())
    files = same_files(tmp_path / "one", tmp_path / "two", ignore=BOOKKEEPING)
    assert files == ["labels/ortho.txt", "ortho.geojson", "predictions.json"]


def test_a_journal_line_cut_short_redoes_its_row_and_nothing_is_counted_twice(ortho, tmp_path):
    whole = _run(tmp_path / "one", ortho, _predictor()[0])
    _run(tmp_path / "two", ortho, _predictor()[0])
    journal = tmp_path / "two" / JOURNAL_DIR / "rank0.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2])  # killed writing row 2's line
    (tmp_path / "two" / "ortho.geojson").unlink()
    notes: list[str] = []
    predictor, calls = _predictor()
    resumed = _run(tmp_path / "two", ortho, predictor, resume=True, notes=notes)
    assert (resumed.rows_before, len(calls)) == (2, 4)  # rows 2 and 3 again
    assert len(notes) == 1 and "rank0.jsonl:3: not a whole JSON line (cut short?); its unit is redone" in notes[0]
    assert torch.equal(resumed.detections.rows(), whole.detections.rows())
    same_files(tmp_path / "one", tmp_path / "two", ignore=BOOKKEEPING)


# The command: a random-weight model at a low threshold finds boxes all over, many of them on row seams.


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    return random_checkpoint(tmp_path_factory.mktemp("weights"))


@pytest.fixture(scope="module")
def small_ortho(tmp_path_factory) -> Path:
    data = scene(160, 240, [(40, 40, 90, 80, 0)], border=64)
    return write_geotiff(tmp_path_factory.mktemp("geo") / "small.tif", data)


def predict_args(weights: Path, source: Path, out: Path, name: str) -> list[str]:
    return ["predict", "--weights", str(weights), "--source", str(source), "--img", "64", "--slice", "64",
            "--batch", "2", "--conf", "0.001", "--max-det", "50", "--device", "cpu", "--save-geojson",
            "--save-txt", "--save-conf", "--save-json", "--project", str(out), "--name", name]  # fmt: skip


def one_process(argv: list[str]) -> None:
    torch.set_num_threads(1)  # as each torchrun process (conftest restores the count)
    assert main(argv) == 0


def test_predict_resume_continues_a_raster_run_and_refuses_a_changed_raster(weights, small_ortho, tmp_path,
                                                                            monkeypatch, capsys):  # fmt: skip
    source = tmp_path / "small.tif"
    shutil.copy(small_ortho, source)
    one_process(predict_args(weights, source, tmp_path, "one"))
    predict_images, calls = Predictor.predict_images, []

    def stopping(self, images):
        calls.append(1)
        if len(calls) == 4:  # in row 1 of 3 (4 tiles a row, 2 calls)
            raise Stop
        return predict_images(self, images)

    monkeypatch.setattr(Predictor, "predict_images", stopping)
    with pytest.raises(Stop):
        main(predict_args(weights, source, tmp_path, "two"))
    monkeypatch.undo()
    capsys.readouterr()
    assert main(["predict", "--resume", str(tmp_path / "two"), "--device", "cpu"]) == 0
    assert "1 of 3 rows finished before" in capsys.readouterr().out
    same_files(tmp_path / "one", tmp_path / "two", ignore=BOOKKEEPING)
    same_settings(tmp_path / "one", tmp_path / "two")

    write_geotiff(source, scene(160, 300, [], border=64))  # another raster under the run's path
    assert main(["predict", "--resume", str(tmp_path / "two"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "args.yaml: raster" in err and "changed since the run began" in err and err.count("\n") == 1


@pytest.mark.slow
def test_two_ranks_share_the_rows_and_write_what_one_process_writes_and_one_resumes(weights, small_ortho, tmp_path):
    one_process(predict_args(weights, small_ortho, tmp_path, "one"))
    run = torchrun("-m", "tphyolo", *predict_args(weights, small_ortho, tmp_path, "two"))
    assert run.stdout.count("results in") == 1  # rank 0 reports for all
    same_files(tmp_path / "one", tmp_path / "two", ignore=BOOKKEEPING)
    same_settings(tmp_path / "one", tmp_path / "two")
    journals = {p.name: len(p.read_text().splitlines()) for p in (tmp_path / "two" / JOURNAL_DIR).iterdir()}
    assert journals == {"rank0.jsonl": 2, "rank1.jsonl": 1}  # rows 0 and 2, and row 1
    (tmp_path / "two" / JOURNAL_DIR / "rank1.jsonl").unlink()  # rank 1 stopped before journaling row 1
    for output in ("small.geojson", "predictions.json"):
        (tmp_path / "two" / output).unlink()
    one_process(["predict", "--resume", str(tmp_path / "two"), "--device", "cpu"])  # one process resumes two
    same_files(tmp_path / "one", tmp_path / "two", ignore=BOOKKEEPING)
    same_settings(tmp_path / "one", tmp_path / "two")


@pytest.mark.slow
def test_a_raster_run_killed_at_a_seeded_row_resumes_to_the_uninterrupted_outputs(weights, tmp_path):
    """SIGKILL once a seeded number of rows (1..3 of 10) is journaled, wherever the process then is."""
    source = write_geotiff(tmp_path / "tall.tif", scene(480, 240, [(40, 40, 90, 80, 0)], border=64))
    one_process(predict_args(weights, source, tmp_path, "one"))
    path = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)
    rows = random.Random(33).randint(1, 3)
    journal = tmp_path / "two" / JOURNAL_DIR / "rank0.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "tphyolo", *predict_args(weights, source, tmp_path, "two")],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    try:
        while not (journal.is_file() and journal.read_text().count("\n") >= rows):
            assert process.poll() is None and time.monotonic() < deadline, "the run ended before the kill"
            time.sleep(0.01)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not (tmp_path / "two" / "tall.geojson").exists()
    torch.set_num_threads(1)
    assert main(["predict", "--resume", str(tmp_path / "two"), "--device", "cpu"]) == 0
    same_files(tmp_path / "one", tmp_path / "two", ignore=BOOKKEEPING)
    same_settings(tmp_path / "one", tmp_path / "two")


@pytest.mark.parametrize("kind", ["raster", "folder"])
def test_a_run_started_with_relative_paths_resumes_from_any_folder(kind, weights, small_ortho, tmp_path, monkeypatch,
                                                                   capsys):  # fmt: skip
    """args.yaml keeps --source and --weights absolute and the fingerprint names them so too: a resume from
    another working directory finds the same weights and sources (it refused both before)."""
    work = tmp_path / "work"
    (work / "in").mkdir(parents=True)
    shutil.copy(weights, work / "w.pt")
    if kind == "raster":
        shutil.copy(small_ortho, work / "in" / "small.tif")
        source = "in/small.tif"
    else:
        for i in range(2):
            cv2.imwrite(str(work / "in" / f"{i}.jpg"), scene(64, 96, [], seed=i).transpose(1, 2, 0))
        source = "in"
    monkeypatch.chdir(work)
    argv = predict_args(Path("w.pt"), Path(source), Path("runs"), "one")
    if kind == "folder":
        argv.remove("--save-geojson")
        del argv[argv.index("--slice"):argv.index("--slice") + 2]
    assert main(argv) == 0
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["predict", "--resume", str(work / "runs" / "one"), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert ("3 of 3 rows finished before" if kind == "raster" else "(2 finished before)") in out

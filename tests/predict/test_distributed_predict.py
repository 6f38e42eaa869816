"""Prediction under torchrun (2 CPU processes, gloo) against one process: the same files with the same bytes,
and an interrupted distributed run resumed to the same end.

The source: four VisDrone images and a three-frame video. In batches of two the units are [0, 1], [2, 3] and the
video: rank 0 runs the first and the video, rank 1 the second (an uneven share, a video as one unit)."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import pytest
import torch
from tests.helpers import save_model_checkpoint
from tests.torchrun import same_files, same_settings, torchrun

from tphyolo.cli import main
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.models import build_model

pytestmark = pytest.mark.slow
BOOKKEEPING = (".journal", "args.yaml")  # which process journaled what differs; args.yaml: `same_settings`


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    """A random-weight model of VisDrone's classes (--save-visdrone writes only those)."""
    torch.manual_seed(0)
    model = build_model("yolov5n", names=list(NAMES))
    return save_model_checkpoint(tmp_path_factory.mktemp("w") / "tiny.pt", model, list(NAMES))


@pytest.fixture(scope="module")
def source(visdrone_mini, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("source")
    images = sorted((visdrone_mini / "images").glob("*.jpg"))[:4]
    for image in images:
        shutil.copy(image, folder / image.name)
    video = cv2.VideoWriter(str(folder / "zz_clip.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 10, (160, 96))
    for image in images[:3]:
        video.write(cv2.resize(cv2.imread(str(image)), (160, 96)))
    video.release()
    return folder


def predict_args(weights: Path, source: Path, out: Path, name: str, *, batch: int) -> list[str]:
    return ["predict", "--weights", str(weights), "--source", str(source), "--img", "128", "--batch", str(batch),
            "--conf", "0.00001", "--max-det", "20", "--device", "cpu", "--save-txt", "--save-conf",
            "--save-visdrone", "--save-json", "--project", str(out), "--name", name]  # fmt: skip


def one_process(argv: list[str]) -> None:
    torch.set_num_threads(1)  # as each torchrun process (conftest restores the count)
    assert main(argv) == 0


def test_two_processes_write_what_one_writes(weights, source, tmp_path):
    one_process(predict_args(weights, source, tmp_path, "one", batch=2))
    run = torchrun("-m", "tphyolo", *predict_args(weights, source, tmp_path, "two", batch=2))
    assert run.stdout.count("results in") == 1 and "in 5 file(s)" in run.stdout  # rank 0 reports for all
    files = same_files(tmp_path / "one", tmp_path / "two", ignore=BOOKKEEPING)
    assert {"zz_clip.mp4", "predictions.json", "labels/zz_clip_000002.txt"} <= set(files)
    same_settings(tmp_path / "one", tmp_path / "two")
    assert sorted(p.name for p in (tmp_path / "two" / ".journal").iterdir()) == ["rank0.jsonl", "rank1.jsonl"]


def test_an_interrupted_run_resumes_without_redoing_what_it_finished(weights, source, tmp_path):
    """In batches of one, rank 1 runs images 1 and 3: writing image 3's labels fails (a folder is in the way)
    after its annotated image is written, and torchrun stops both ranks. Resumed, image 1 is kept, image 3 is
    done again, and the folder ends as one uninterrupted process leaves it."""
    one_process(predict_args(weights, source, tmp_path, "one", batch=1))
    third = sorted(source.glob("*.jpg"))[3].stem
    blocker = tmp_path / "two" / "labels" / f"{third}.txt"
    blocker.mkdir(parents=True)
    failed = torchrun("-m", "tphyolo", *predict_args(weights, source, tmp_path, "two", batch=1), "--exist-ok",
                      check=False)  # fmt: skip
    assert failed.returncode != 0 and "is a directory" in failed.stderr.lower()
    assert (tmp_path / "two" / f"{third}.jpg").is_file()  # half-written
    blocker.rmdir()
    resumed = torchrun("-m", "tphyolo", "predict", "--resume", str(tmp_path / "two"), "--device", "cpu")
    finished_before = int(resumed.stdout.split(" finished before")[0].rsplit("(", 1)[1])
    assert 1 <= finished_before <= 4 and "in 5 file(s)" in resumed.stdout  # image 3 is done again
    same_files(tmp_path / "one", tmp_path / "two", ignore=BOOKKEEPING)


def test_resume_refuses_new_settings_and_folders_that_are_not_runs(weights, tmp_path, capsys):
    assert main(["predict", "--resume", str(tmp_path), "--conf", "0.5"]) == 2
    assert "--resume continues a run with its saved settings; drop --conf" in capsys.readouterr().err
    assert main(["predict", "--resume", str(tmp_path)]) == 2
    assert "not a prediction run folder (no args.yaml)" in capsys.readouterr().err

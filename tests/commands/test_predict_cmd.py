"""`tphyolo predict` end to end: outputs in runs/predict/NAME, and one-line errors with exit code 2."""

import json
import shutil

import cv2
import numpy as np
import pytest
import torch
from tests.helpers import exit_code, save_model_checkpoint

from tphyolo.cli import main
from tphyolo.models import build_model


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    torch.manual_seed(0)
    model = build_model("yolov5n", num_classes=2)
    path = tmp_path_factory.mktemp("weights") / "tiny.pt"
    return save_model_checkpoint(path, model, ["car", "bus"])  # a set of two classes: categories 1, 2


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("source")
    rng = np.random.default_rng(5)
    for name in ("one.jpg", "two.jpg"):
        cv2.imwrite(str(folder / name), rng.integers(0, 255, (64, 96, 3), dtype=np.uint8))
    return folder


@pytest.mark.slow
def test_predict_writes_every_output(weights, source, tmp_path, capsys):
    argv = ["predict", "--weights", str(weights), "--source", str(source), "--img", "64", "--conf", "0.001"]
    argv += ["--device", "cpu", "--project", str(tmp_path), "--name", "run"]
    outputs = ["--save-txt", "--save-conf", "--save-visdrone", "--save-json"]
    assert main(argv + outputs + ["--augment", "--tta-scales", "1", "0.83", "--slice", "64"]) == 0
    out = tmp_path / "run"
    assert "results in" in capsys.readouterr().out
    for stem in ("one", "two"):
        assert (out / f"{stem}.jpg").is_file()
        assert (out / "labels" / f"{stem}.txt").read_text().strip()
        visdrone = np.loadtxt(out / "visdrone" / f"{stem}.txt", delimiter=",", ndmin=2)
        assert visdrone.shape[1] == 8 and set(visdrone[:, 5]) <= {1.0, 2.0}  # class index + 1
        assert (visdrone[:, 0] >= 0).all() and (visdrone[:, 0] + visdrone[:, 2] <= 96 + 1e-2).all()
    assert {r["image_id"] for r in json.loads((out / "predictions.json").read_text())} == {1, 2}  # one, two
    assert main(argv + ["--no-save-img"]) == 0  # the same name again: a new folder, no images
    assert sorted(p.name for p in (tmp_path / "run2").iterdir()) == [".journal", "args.yaml", "decisions.yaml"]


def test_a_visdrone_submission_of_a_model_of_other_classes_numbers_them_as_its_data_set(source, tmp_path):
    """A model of classes that are not VisDrone's was trained on files numbered class index + 1 (a data set
    without a `categories:` mapping): its submission is numbered so."""
    names = ["car", "person", "dog"]
    torch.manual_seed(0)
    weights = save_model_checkpoint(tmp_path / "other.pt", build_model("yolov5n", names=names), names)
    argv = ["predict", "--weights", str(weights), "--source", str(source), "--img", "64", "--device", "cpu",
            "--conf", "0.001", "--project", str(tmp_path / "runs"), "--name", "sub", "--save-visdrone"]  # fmt: skip
    assert main(argv) == 0
    files = sorted((tmp_path / "runs" / "sub" / "visdrone").glob("*.txt"))
    categories = set(np.concatenate([np.loadtxt(f, delimiter=",", ndmin=2)[:, 5] for f in files]).tolist())
    assert categories and categories <= {1.0, 2.0, 3.0}


def test_missing_weights_is_a_one_line_error(source, capsys):
    assert main(["predict", "--weights", "nope.pt", "--source", str(source), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "tphyolo predict: error: weights file nope.pt does not exist"


def test_missing_source_is_a_one_line_error(weights, tmp_path, capsys):
    argv = ["predict", "--weights", str(weights), "--source", str(tmp_path / "none"), "--device", "cpu"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no such file or folder" in err


def test_weights_flag_is_required(capsys):
    assert main(["predict", "--source", "x.jpg"]) == 2
    assert "--source and --weights are required (unless --resume RUN_DIR)" in capsys.readouterr().err


def test_visdrone_submission_files_are_scored_by_eval(weights, visdrone_mini, tmp_path):
    data = tmp_path / "data"
    for folder in ("images", "annotations"):
        (data / folder).mkdir(parents=True)
    for image in sorted((visdrone_mini / "images").glob("*.jpg"))[:2]:
        shutil.copy(image, data / "images" / image.name)
        shutil.copy(visdrone_mini / "annotations" / f"{image.stem}.txt", data / "annotations")
    argv = ["predict", "--weights", str(weights), "--source", str(data / "images"), "--img", "160", "--conf", "0.01"]
    argv += ["--device", "cpu", "--project", str(tmp_path), "--name", "sub", "--save-visdrone", "--no-save-img"]
    assert main(argv) == 0
    scores = tmp_path / "scores.json"
    argv = ["eval", "--gt", str(data / "annotations"), "--pred", str(tmp_path / "sub" / "visdrone")]
    assert main(argv + ["--images", str(data / "images"), "--json", str(scores)]) == 0
    assert scores.is_file()


@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--half"], "--half needs a CUDA device, got cpu"), (["--half", "--amp", "fp16"], "cannot be combined")],
)
def test_half_is_refused_on_cpu_and_with_an_amp_dtype(weights, source, tmp_path, capsys, flags, message):
    argv = ["predict", "--weights", str(weights), "--source", str(source), "--device", "cpu"]
    assert main(argv + ["--project", str(tmp_path)] + flags) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--img", "0"], "argument --img/--imgsz/--img-size: must be in [1, 11584], got 0"),
        (["--img", "-64"], "argument --img/--imgsz/--img-size: must be in [1, 11584], got -64"),
        (["--img", "100000"], "argument --img/--imgsz/--img-size: must be in [1, 11584], got 100000"),
        (["--img", "2147483648"], "argument --img/--imgsz/--img-size: must be in [1, 11584], got 2147483648"),
        (["--batch", "0"], "argument --batch/--batch-size: must be >= 1, got 0"),
        (["--max-det", "-1"], "argument --max-det: must be >= 1, got -1"),
        (["--merge-iou", "2"], "argument --merge-iou: must be in [0, 1], got 2"),
        (["--conf", "nan"], "argument --conf/--conf-thres: must be in [0, 1], got nan"),
        (["--classes", "-1"], "argument --classes: must be >= 0, got -1"),
        (["--augment", "--tta-scales", "1000"], "argument --tta-scales: must be in (0, 4], got 1000"),
        (
            ["--img", "4000", "--augment", "--tta-scales", "3"],
            "--tta-scales 3 at --img 4000: a 12000 px input, above the image-size limit of 11584",
        ),
        (["--classes", "0", "99"], "--classes 99: the model has 2 classes (ids 0..1)"),
        (["--tta-scales", "1", "0.5"], "--tta-scales/--tta-flips choose the passes of --augment"),
        (["--slice", "16"], "argument --slice: must be >= 32, got 16"),
        (["--slice", "64", "--overlap", "1.5"], "argument --overlap: must be in [0, 0.9], got 1.5"),
        (["--slice", "64", "--overlap", "0.999"], "argument --overlap: must be in [0, 0.9], got 0.999"),
        (["--device", "mps"], "--device mps: "),
        (["--overlap", "0.5"], "--overlap set(s) sliced inference up; add --slice SIZE"),
        (["--slice-full"], "--slice-full set(s) sliced inference up"),
        (["--skip-empty"], "--skip-empty set(s) sliced inference up"),
        (["--slice", "big"], "argument --slice: invalid size ('auto', 'model', 0 or pixels) value: 'big'"),
        (["--slice", "64", "--slice-full-min", "50"], "a smallest box for the full-image pass needs the full-image"),
        (["--match", "ios"], "--match: wbf fuses boxes of one class by IoU; choose --merge nms, nmm or greedy-nmm"),
        (["--merge", "nmm", "--match", "giou"], "argument --match: invalid choice: 'giou'"),
        (["--save-conf"], "--save-conf adds scores to the --save-txt files"),
        (["--amp", "bf16", "--no-amp"], "--amp bf16 and --no-amp contradict each other"),
    ],
)
def test_nonsense_numbers_and_flags_are_refused_in_one_line(weights, source, tmp_path, capsys, flags, message):
    """Refused in one line naming the flag before any work: argparse for a value outside the flag's bounds, the
    config for settings that do not fit together."""
    argv = ["predict", "--weights", str(weights), "--source", str(source), "--device", "cpu"]
    assert exit_code(argv + ["--project", str(tmp_path)] + flags) == 2
    err = capsys.readouterr().err
    assert err.startswith("tphyolo predict: error: ") and message in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())  # refused before anything was written

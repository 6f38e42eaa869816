"""What the models choose when the command line leaves it to them: a checkpoint runs at its training size
unless `--img` is given, said in the first line (`tphyolo.infer.input_shape.settled_config`)."""

from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import torch
import yaml

from tphyolo.checkpoint.format import save_checkpoint
from tphyolo.cli import main
from tphyolo.infer.backends.pytorch import largest_own_imgsz, trained_imgsz
from tphyolo.infer.config import InferenceConfig
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor

TRAINED_AT = 96  # the training size the checkpoint records, unlike the default 640


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A yolov5n checkpoint (random weights, seed 0) whose saved training settings say imgsz 96."""
    torch.manual_seed(0)
    model = build_model("yolov5n", num_classes=2)
    payload = {"model": model.state_dict(), "model_yaml": model.yaml, "names": ["car", "bus"], "nc": 2,
               "train_args": {"imgsz": TRAINED_AT, "batch": 8}}  # fmt: skip
    return save_checkpoint(tmp_path_factory.mktemp("trained") / "tiny.pt", payload)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("source")
    cv2.imwrite(str(folder / "one.jpg"), np.random.default_rng(5).integers(0, 255, (200, 300, 3), dtype=np.uint8))
    return folder


def test_a_checkpoint_left_to_itself_runs_at_its_training_size(trained):
    assert Predictor(str(trained), InferenceConfig(from_model=("imgsz",)), device="cpu").config.imgsz == TRAINED_AT
    assert Predictor(str(trained), InferenceConfig(imgsz=128), device="cpu").config.imgsz == 128  # given: kept


def _predict(trained, source, tmp_path, capsys, name: str, *flags: str) -> tuple[list[str], str]:
    argv = ["predict", "--weights", str(trained), "--source", str(source), "--conf", "0.001", "--save-txt",
            "--save-conf", "--device", "cpu", "--project", str(tmp_path), "--name", name, *flags]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out.splitlines(), (tmp_path / name / "labels" / "one.txt").read_text()


def test_predict_without_img_runs_at_the_training_size_and_says_so_first(trained, source, tmp_path, capsys):
    lines, default = _predict(trained, source, tmp_path, capsys, "default")
    runtime = [line for line in lines[:3] if "on OpenVINO (fp32)" in line or line.startswith("what runs: ")]
    assert len(runtime) == 2 and lines[len(runtime)] == (
        f"--img {TRAINED_AT}: the image size tiny.pt was trained at (--img overrides)")
    _, given = _predict(trained, source, tmp_path, capsys, "given", "--img", str(TRAINED_AT))
    assert default == given and len(given.splitlines()) > 10  # the oracle: the same size given by hand
    ran = yaml.safe_load((tmp_path / "default" / "decisions.yaml").read_text())["predict"]
    assert {k: (v["value"], v["source"]) for k, v in ran.items()} == {
        "runtime": ("openvino", "rule"), "precision": ("fp32", "rule"), "layout": ("NCHW", "file"),
        "threads": (ran["threads"]["value"], "rule")}  # the suite's CPU has no native bf16 (conftest)
    lines, other = _predict(trained, source, tmp_path, capsys, "other", "--img", "160")
    assert not any("was trained at" in line for line in lines) and other != given


def test_an_ensemble_left_to_its_models_runs_at_the_largest_training_size():
    sizes = [SimpleNamespace(own_imgsz=96), SimpleNamespace(own_imgsz=None), SimpleNamespace(own_imgsz=160)]
    assert largest_own_imgsz(sizes) == (160, sizes[2])
    assert largest_own_imgsz([SimpleNamespace(own_imgsz=None)]) is None


def test_a_training_size_that_is_no_image_size_is_refused_naming_the_file():
    assert trained_imgsz({"imgsz": 320}, source="a.pt") == 320
    assert trained_imgsz({"epochs": 3}, source="a.pt") is None
    for bad in (0, True, "320", 10**6):
        with pytest.raises(ValueError, match="a.pt: train_args 'imgsz' must be an image size"):
            trained_imgsz({"imgsz": bad}, source="a.pt")

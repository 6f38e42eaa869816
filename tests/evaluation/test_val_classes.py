"""`val` checks the model's classes against the data's the same way for every kind of --data, before any
inference: a yaml's names, a bare VisDrone folder's ten, a bare YOLO folder's class ids. A refusal is one line
naming both counts, and leaves no run folder; a run that fails during inference removes the folder it made."""

import shutil

import cv2
import numpy as np
import pytest
import torch
from tests.helpers import save_model_checkpoint

from tphyolo.cli import main
from tphyolo.evaluation import val as val_module
from tphyolo.models import build_model


@pytest.fixture(scope="module")
def coco_sized(tmp_path_factory):
    """An 80-class yolov5n checkpoint (random weights), as a COCO model is."""
    torch.manual_seed(0)
    names = [f"class{i}" for i in range(80)]
    return save_model_checkpoint(tmp_path_factory.mktemp("w") / "coco80.pt", build_model("yolov5n", names=names), names)


@pytest.fixture(scope="module")
def three_classes(tmp_path_factory):
    torch.manual_seed(0)
    names = ["car", "van", "bus"]
    return save_model_checkpoint(tmp_path_factory.mktemp("w") / "three.pt", build_model("yolov5n", names=names), names)


@pytest.fixture
def no_inference(monkeypatch):
    monkeypatch.setattr(val_module, "evaluate", lambda *a, **k: pytest.fail("inference ran"))


def _val(weights, data, tmp_path, *extra) -> list[str]:
    return ["val", "--weights", str(weights), "--data", str(data), "--img", "64", "--device", "cpu",
            "--workers", "0", "--project", str(tmp_path / "runs"), *extra]  # fmt: skip


def test_a_bare_visdrone_folder_and_a_model_of_other_classes_is_refused_before_any_image_is_read(
    coco_sized, visdrone_mini, tmp_path, capsys, monkeypatch, no_inference
):
    monkeypatch.setattr(val_module, "build_dataset", lambda *a, **k: pytest.fail("the images were read"))
    assert main(_val(coco_sized, visdrone_mini, tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("tphyolo val: error:")
    assert "the model has 80 classes" in err and f"{visdrone_mini} has 10" in err and "pedestrian" in err
    assert not (tmp_path / "runs").exists()


def test_a_data_yaml_of_other_classes_is_refused_in_the_same_words(coco_sized, visdrone_mini, tmp_path, capsys):
    yaml = tmp_path / "data.yaml"
    yaml.write_text(f"path: {visdrone_mini}\nval: images\nnames: [a, b, c]\n")
    assert main(_val(coco_sized, yaml, tmp_path)) == 2
    err = capsys.readouterr().err
    assert "the model has 80 classes" in err and "has 3 (named in its yaml: a, b, c)" in err


def test_labels_with_ids_the_model_lacks_are_refused_before_inference(three_classes, tmp_path, capsys, no_inference):
    root = tmp_path / "yolo"
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for i, cls in enumerate((0, 7)):
        cv2.imwrite(str(root / "images" / f"{i}.jpg"), np.full((64, 96, 3), 90, np.uint8))
        (root / "labels" / f"{i}.txt").write_text(f"{cls} 0.5 0.5 0.2 0.2\n")
    assert main(_val(three_classes, root / "images", tmp_path)) == 2
    err = capsys.readouterr().err
    assert "the model has 3 classes (ids 0..2), but the labels of" in err and "use class id 7" in err
    assert not (tmp_path / "runs").exists()


def test_a_run_that_fails_during_inference_removes_its_empty_folder(three_classes, visdrone_mini, tmp_path, capsys,
                                                                   monkeypatch):  # fmt: skip
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    image = sorted((visdrone_mini / "images").glob("*.jpg"))[0]
    shutil.copy(image, data / "images" / image.name)
    (data / "labels").mkdir()
    (data / "labels" / f"{image.stem}.txt").write_text("1 0.5 0.5 0.1 0.1\n")

    def broken(*args, **kwargs):
        raise OSError("disk on fire")

    monkeypatch.setattr(val_module, "evaluate", broken)
    for _ in range(2):
        assert main(_val(three_classes, data / "images", tmp_path)) == 2
        assert "disk on fire" in capsys.readouterr().err
        assert (tmp_path / "runs").is_dir() and not any((tmp_path / "runs").iterdir())  # no exp, exp2 left

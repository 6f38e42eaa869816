"""Training and validating a crop classifier: the accuracy report, and `tphyolo classify train|val` end to end."""

import csv

import numpy as np
import pytest
from painted_scene import write_painted

from tphyolo.classify.checkpoint import load_classifier
from tphyolo.classify.data import select_classes
from tphyolo.classify.report import Accuracy, plot_confusion
from tphyolo.cli import main
from tphyolo.data.builtin.synthetic_fine import CONFUSABLE, NAMES, generate_synthetic_fine
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.classifier.fit import validate_classifier


def test_accuracy_hand_worked(tmp_path):
    accuracy = Accuracy.from_predictions(np.array([0, 0, 1, 1, 1, 2]), np.array([0, 1, 1, 1, 0, 0]), ["a", "b", "c"])
    np.testing.assert_array_equal(accuracy.matrix, [[1, 1, 0], [1, 2, 0], [1, 0, 0]])  # [predicted, true]
    assert accuracy.accuracy == pytest.approx(3 / 6)
    np.testing.assert_allclose(accuracy.per_class, [1 / 3, 2 / 3, np.nan])
    assert accuracy.mean_class == pytest.approx(0.5)  # class c has no crops: left out
    table = accuracy.table()
    assert "0.333" in table and "0.667" in table and "0.500" in table
    assert plot_confusion(accuracy, tmp_path / "cm.png").stat().st_size > 1000


def test_classes_default_to_the_confusable_list_else_all():
    names = ("car", "van", "bus")
    assert select_classes(names, None) == (names, (0, 1, 2))
    assert select_classes(names, None, ("van", "car")) == (("van", "car"), (1, 0))
    assert select_classes(names, ["bus", "van"], ("van", "car")) == (("bus", "van"), (2, 1))
    with pytest.raises(ValueError, match="not in the dataset's classes"):
        select_classes(names, ["truck", "van"])
    with pytest.raises(ValueError, match="at least two"):
        select_classes(names, ["van"])


@pytest.fixture(scope="module")
def tiny_fine(tmp_path_factory):
    return generate_synthetic_fine(tmp_path_factory.mktemp("fine"), n_train=3, n_val=1, seed=5)


@pytest.mark.slow
def test_train_one_epoch_then_val(tiny_fine, tmp_path, capsys):
    argv = ["classify", "train", "--data", str(tiny_fine), "--epochs", "1", "--img", "32", "--batch", "8"]
    assert main([*argv, "--device", "cpu", "--project", str(tmp_path), "--name", "c"]) == 0
    out = capsys.readouterr().out
    run = tmp_path / "c"
    assert {"results.csv", "confusion_matrix.png", "weights"} <= {p.name for p in run.iterdir()}
    with (run / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and {"train/loss", "val/accuracy", "val/mean_class_accuracy"} <= rows[0].keys()
    best = load_classifier(run / "weights" / "best.pt")
    assert best.names == CONFUSABLE and best.class_ids == tuple(NAMES.index(n) for n in CONFUSABLE)
    assert (best.img, best.context, best.arch, best.dataset_names) == (32, 0.1, "crop-cnn", NAMES)
    assert load_classifier(run / "weights" / "last.pt").epoch == 0
    for name in CONFUSABLE:
        assert name in out
    # validating the saved weights gives the accuracy recorded while training
    accuracy = validate_classifier(run / "weights" / "best.pt", tiny_fine, runtime=RuntimeConfig(device="cpu"))
    assert accuracy.accuracy == pytest.approx(float(rows[0]["val/accuracy"]), abs=1e-5)
    assert accuracy.support.sum() >= 5
    assert main(["classify", "val", "--weights", str(run / "weights" / "best.pt"), "--data", str(tiny_fine),
                 "--device", "cpu"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert f"{accuracy.accuracy:.3f}" in out and "pred \\ true" in out


@pytest.mark.slow
def test_train_on_a_painted_coco_set_with_chosen_classes(tmp_path, capsys):
    data = write_painted(tmp_path / "coco", "coco")
    argv = ["classify", "train", "--data", str(data), "--classes", "green", "red", "--epochs", "1", "--img", "16"]
    assert main([*argv, "--device", "cpu", "--project", str(tmp_path), "--name", "p", "--arch", "resnet18"]) == 0
    checkpoint = load_classifier(tmp_path / "p" / "weights" / "best.pt")
    assert checkpoint.names == ("green", "red") and checkpoint.class_ids == (2, 1)


def test_val_without_weights_and_unknown_classes_are_one_line_errors(tmp_path, capsys):
    data = write_painted(tmp_path / "yolo", "yolo")
    assert main(["classify", "val", "--data", str(data), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "tphyolo classify: error: classify val needs --weights: a crop-classifier checkpoint"
    argv = ["classify", "train", "--data", str(data), "--classes", "red", "purple", "--device", "cpu"]
    assert main([*argv, "--project", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "['purple'] are not in the dataset's classes" in err


def test_a_bare_folder_warns_that_the_classifier_validates_on_its_training_images(tiny_fine, caplog):
    from tphyolo.classify.config import ClassifyConfig
    from tphyolo.training.classifier.fit import build_crop_data

    folder = tiny_fine.parent / "train" / "images"  # a bare folder: both splits
    build_crop_data(ClassifyConfig(data=str(folder), img=16))
    assert "crop classifier: 3 of the 3 validation images are also training images" in caplog.text
    caplog.clear()
    build_crop_data(ClassifyConfig(data=str(tiny_fine), img=16))  # separate splits
    assert "validation images are also training images" not in caplog.text


def test_classify_train_help_shows_train_s_flags_and_val_s_its_own(capsys):
    with pytest.raises(SystemExit):
        main(["classify", "train", "-h"])
    train_help = capsys.readouterr().out
    assert train_help.startswith("usage: tphyolo classify train") and "--epochs" in train_help
    assert "--task" not in train_help and "--device" in train_help
    with pytest.raises(SystemExit):
        main(["classify", "val", "-h"])
    val_help = capsys.readouterr().out
    assert "--task" in val_help and "--weights" in val_help and "--epochs" not in val_help


def test_a_training_that_fails_in_its_first_epoch_leaves_no_run_folder(tiny_fine, tmp_path, capsys, monkeypatch):
    from tphyolo.training.classifier import fit

    def broken(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(fit, "train_one_epoch", broken)
    argv = ["classify", "train", "--data", str(tiny_fine), "--epochs", "1", "--img", "16", "--device", "cpu"]
    for _ in range(2):
        assert main([*argv, "--project", str(tmp_path / "runs")]) == 2
        assert "no space left on device" in capsys.readouterr().err
        assert not any((tmp_path / "runs").iterdir())  # neither exp nor exp2: the next run is exp again

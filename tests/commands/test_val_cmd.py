"""`tphyolo val`: a table and plots for a tiny checkpoint on VisDrone images, and one-line errors with exit 2."""

import shutil

import pytest
import torch
from tests.helpers import save_model_checkpoint

from tphyolo.cli import main
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.models import build_model

NAMES = list(VISDRONE_NAMES)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    torch.manual_seed(0)
    model = build_model("yolov5n", names=NAMES)
    path = tmp_path_factory.mktemp("weights") / "tiny.pt"
    return save_model_checkpoint(path, model, NAMES)


@pytest.fixture(scope="module")
def data_yaml(visdrone_mini, tmp_path_factory):
    root = tmp_path_factory.mktemp("visdrone")
    shutil.copytree(visdrone_mini / "annotations", root / "annotations")
    (root / "images").mkdir()
    for image in sorted((visdrone_mini / "images").glob("*.jpg"))[4:7]:
        shutil.copy(image, root / "images" / image.name)
    path = root / "data.yaml"
    path.write_text(f"path: {root}\nval: images\ntest: images\nnames: {NAMES}\n")
    return path


@pytest.mark.slow
def test_val_prints_the_table_and_writes_outputs(weights, data_yaml, tmp_path, capsys):
    argv = ["val", "--weights", str(weights), "--data", str(data_yaml), "--img", "160", "--batch", "2"]
    argv += ["--device", "cpu", "--workers", "0", "--project", str(tmp_path), "--name", "v", "--task", "test"]
    assert main(argv + ["--save-json", "--save-txt", "--plots", "--protocol", "visdrone"]) == 0
    out = capsys.readouterr().out
    assert "mAP@.5:.95" in out and "visdrone protocol" in out and "AR500" in out
    assert "pedestrian" in out  # --task test prints every class
    assert "NMS: conf 0.001, iou 0.45, max_det 500, agnostic no\n" in out  # the settings the scores depend on
    files = {p.name for p in (tmp_path / "v").iterdir()}
    assert {"predictions.json", "labels", "val_batch0_labels.jpg", "val_batch0_pred.jpg"} <= files
    figures = {f"{curve}_curve.png" for curve in ("PR", "F1", "P", "R")}  # an untrained model's: flat, saying why
    assert {"confusion_matrix.png", "confusion_matrix_normalized.png", *figures} <= files
    assert len(list((tmp_path / "v" / "labels").iterdir())) == 3


def test_missing_weights_is_a_one_line_error(data_yaml, capsys):
    assert main(["val", "--weights", "nope.pt", "--data", str(data_yaml), "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip() == "tphyolo val: error: weights file nope.pt does not exist"


def test_missing_data_is_a_one_line_error(weights, tmp_path, capsys):
    assert main(["val", "--weights", str(weights), "--data", str(tmp_path / "none.yaml"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "none.yaml" in err


def test_half_on_cpu_is_refused(weights, data_yaml, capsys):
    argv = ["val", "--weights", str(weights), "--data", str(data_yaml), "--device", "cpu", "--half"]
    assert main(argv) == 2
    assert "--half needs a CUDA device" in capsys.readouterr().err


def test_half_with_an_explicit_amp_dtype_is_refused(weights, data_yaml, capsys):
    argv = ["val", "--weights", str(weights), "--data", str(data_yaml), "--device", "cpu", "--half", "--amp", "bf16"]
    assert main(argv) == 2
    assert "cannot be combined with amp 'bf16'" in capsys.readouterr().err


def test_protocol_choices_come_from_the_registry(weights, data_yaml, capsys):
    from tphyolo.metrics.registry import PROTOCOLS

    for command in ("val", "eval"):
        with pytest.raises(SystemExit):
            main([command, "-h"])
        assert f"--protocol {{{','.join(PROTOCOLS)}}}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["val", "--weights", str(weights), "--data", str(data_yaml), "--protocol", "voc"])
    err = capsys.readouterr().err
    assert "invalid choice: 'voc'" in err and all(name in err for name in PROTOCOLS)

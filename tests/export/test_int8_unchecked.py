"""An INT8 accuracy check whose float side scores (near) zero cannot fail: it is said, the command exits 1
unless the check is skipped, and the file's metadata marks it unchecked."""

import pytest
import torch
from tests.helpers import BLOCKS_SIZE, save_model_checkpoint

from tphyolo.cli import main
from tphyolo.export.int8_check import MIN_FLOAT_MAP50, Int8Accuracy
from tphyolo.infer.backends import load_backend
from tphyolo.models import build_model


def test_a_float_side_below_the_floor_makes_the_check_say_nothing_whatever_the_drop():
    silent = Int8Accuracy("val", 0.0, 0.0, 0.0, 0.0, max_drop=0.01)
    assert silent.says_nothing and not silent.ok
    assert "UNCHECKED" in silent.summary() and "mAP50 0.0000" in silent.unchecked_reason
    learned = Int8Accuracy("val", MIN_FLOAT_MAP50, MIN_FLOAT_MAP50, 0.0, 0.0, max_drop=0.01)
    assert not learned.says_nothing and learned.ok and learned.unchecked_reason == ""


@pytest.fixture(scope="module")
def untrained_weights(tmp_path_factory, blocks_data):
    """A yolov5n checkpoint that finds nothing, as an early one: random weights (seed 0) with every
    objectness logit pushed to -30, so that no box reaches validation's conf 0.001 and the float mAP50 is 0."""
    torch.manual_seed(0)
    model = build_model("yolov5n", names=["red", "blue"])
    with torch.no_grad():
        for conv in model.head.output_convs():
            conv.bias.view(model.head.na, model.head.no)[:, 4] = -30.0
    return save_model_checkpoint(tmp_path_factory.mktemp("untrained") / "early.pt", model, ["red", "blue"])


@pytest.mark.slow
def test_an_int8_check_of_a_model_that_finds_nothing_exits_1_and_marks_the_file_unchecked(
    untrained_weights, blocks_data, tmp_path, capsys
):
    argv = ["export", "--weights", str(untrained_weights), "--format", "onnx", "--int8", "--data", str(blocks_data),
            "--img", str(BLOCKS_SIZE), "--calib-images", "4", "--calib-val", "4", "--device", "cpu"]  # fmt: skip
    out = tmp_path / "a.onnx"
    assert main([*argv, "--out", str(out)]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]  # not progress bars
    assert len(errors) == 1 and errors[0].startswith(f"tphyolo export: error: {out}: the accuracy check says nothing")
    assert "--no-accuracy-check" in errors[0]
    meta = load_backend(out).metadata
    assert meta.int8_map50[0] == 0.0 and "mAP50 0.0000" in meta.int8_unchecked
    skipped = tmp_path / "b.onnx"
    assert main([*argv, "--out", str(skipped), "--no-accuracy-check"]) == 0
    meta = load_backend(skipped).metadata
    assert meta.int8 and meta.int8_map50 == () and "skipped" in meta.int8_unchecked

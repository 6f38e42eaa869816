"""Checkpoints that are wrong in a way a user can meet: each gets one line naming the file and the problem,
or loads with a warning when it can still be used."""

import logging

import pytest
import torch
from tests.helpers import save_model_checkpoint

from tphyolo.checkpoint.format import CheckpointError, load_checkpoint
from tphyolo.checkpoint.legacy import LegacyCheckpointError
from tphyolo.cli import main
from tphyolo.models import build_model


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ckpt") / "good.pt"
    return save_model_checkpoint(path, build_model("yolov5n", num_classes=2), ["a", "b"])


def _resaved(good, path, **changes):
    payload = torch.load(good, weights_only=True)
    torch.save(payload | changes, path)
    return path


@pytest.mark.parametrize("version", ["1", 0, -3, 1.0])
def test_a_malformed_format_version_is_not_called_newer(good, tmp_path, version):
    path = _resaved(good, tmp_path / "v.pt", format_version=version)
    with pytest.raises(CheckpointError, match="'format_version' must be an integer >= 1") as error:
        load_checkpoint(path)
    assert str(error.value).startswith(str(path)) and "newer" not in str(error.value)


def test_a_newer_format_version_asks_for_an_upgrade(good, tmp_path):
    with pytest.raises(CheckpointError, match="newer than this tphyolo"):
        load_checkpoint(_resaved(good, tmp_path / "v.pt", format_version=99))


def test_a_folder_given_as_weights_is_called_a_folder(tmp_path, capsys):
    with pytest.raises(CheckpointError, match="a folder, not a checkpoint file"):
        load_checkpoint(tmp_path)
    image = tmp_path / "x.png"
    image.write_bytes(b"")  # never read: the weights are refused first
    argv = ["predict", "--weights", str(tmp_path), "--source", str(image), "--device", "cpu"]
    assert main([*argv, "--project", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err == f"tphyolo predict: error: {tmp_path}: a folder, not a checkpoint file; give its .pt file (e.g. " \
        "weights/best.pt)\n"  # fmt: skip


class _Call:
    """Unpickling this calls `function(*args)`."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


@pytest.mark.parametrize(
    "args", [(1, 2), ("storage", 0, (2,), (1,), False, None), (None, "x", "y", "z", False, {})], ids=str
)
def test_a_crafted_tensor_record_gets_the_restricted_readers_one_line_error(tmp_path, args):
    path = tmp_path / "crafted.pt"
    torch.save({"model": _Call(torch._utils._rebuild_tensor_v2, *args)}, path)
    with pytest.raises(LegacyCheckpointError) as error:
        load_checkpoint(path)
    assert str(error.value).startswith(str(path)) and "\n" not in str(error.value)


def test_weights_holding_nan_load_with_a_warning(good, tmp_path, caplog):
    payload = torch.load(good, weights_only=True)
    weights = dict(payload["model"])
    key = next(k for k, v in weights.items() if v.is_floating_point() and v.ndim == 4)
    weights[key] = torch.full_like(weights[key], float("nan"))
    path = tmp_path / "nan.pt"
    torch.save(payload | {"model": weights}, path)
    with caplog.at_level(logging.WARNING, logger="tphyolo"):
        load_checkpoint(path)
    assert f"{path}: 1 weight tensor(s) hold NaN or inf ({key})" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tphyolo"):
        load_checkpoint(good)
    assert "NaN" not in caplog.text


def _state_dict_changed(good, path, change):
    payload = torch.load(good, weights_only=True)
    payload["model"] = dict(payload["model"])
    payload.pop("ema", None)
    change(payload)
    torch.save(payload, path)
    return path


def _first_conv(payload):
    return next(k for k, v in payload["model"].items() if v.ndim == 4)


def _huge_yaml(payload):
    payload["model_yaml"] = dict(payload["model_yaml"], backbone=[list(r) for r in payload["model_yaml"]["backbone"]])
    payload["model_yaml"]["backbone"][2][1] = 3300


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.__setitem__("model", {0: torch.zeros(3)}),
         ": 'model' must be a state dict with parameter names as keys, got the key 0 (int)"),
        (lambda p: p["model"].__setitem__(_first_conv(p), torch.zeros(1, 1, 1, 1)),
         ": weights do not fit the model built from its model_yaml: 1 of another shape (model.0.conv.weight (1, 1, "
         "1, 1) for (16, 3, 6, 6))"),
        (lambda p: p["model"].pop(_first_conv(p)),
         ": weights do not fit the model built from its model_yaml: 1 missing (model.0.conv.weight)"),
        (lambda p: p["model"].update({f"extra.{i}": torch.zeros(1) for i in range(5)}),
         ": weights do not fit the model built from its model_yaml: 5 unexpected (extra.0, extra.1, extra.2, ... (2 "
         "more))"),
        (_huge_yaml, " (its model_yaml): layer 2 (C3): 1089 repeats, above the limit of 100"),
    ],
)
def test_weights_that_cannot_be_loaded_are_named_by_predict_and_convert(good, tmp_path, capsys, change, message):
    """Each refusal is one line that starts with the checkpoint's path, before any output is written."""
    path = _state_dict_changed(good, tmp_path / "bad.pt", change)
    image = tmp_path / "x.jpg"
    image.write_bytes(b"")  # never read: the weights are refused first
    argv = ["predict", "--weights", str(path), "--source", str(image), "--device", "cpu"]
    assert main([*argv, "--project", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == f"tphyolo predict: error: {path}{message}\n"
    assert main(["convert", "checkpoint", str(path), str(tmp_path / "out" / "bad.pt")]) == 2
    assert capsys.readouterr().err == f"tphyolo convert: error: {path}{message}\n"
    assert not (tmp_path / "out" / "bad.pt").exists()


def test_half_precision_weights_load_and_convert_into_a_new_folder(good, tmp_path, capsys):
    weights = torch.load(good, weights_only=True)["model"]
    halved = {k: v.half() if v.is_floating_point() else v for k, v in weights.items()}
    path = _state_dict_changed(good, tmp_path / "half.pt", lambda p: p.__setitem__("model", halved))
    out = tmp_path / "new" / "folder" / "converted.pt"
    assert main(["convert", "checkpoint", str(path), str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: ")
    reference = load_checkpoint(good).build_model().state_dict()
    for key, value in load_checkpoint(out).build_model().state_dict().items():
        torch.testing.assert_close(value, reference[key].half().to(value.dtype), atol=0, rtol=0)

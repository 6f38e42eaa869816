"""`tphyolo export` end to end: default paths beside the weights, the check against PyTorch, and one-line
errors."""

import pytest
import torch

from tphyolo.checkpoint.format import save_checkpoint
from tphyolo.cli import main
from tphyolo.export import load_backend


@pytest.fixture
def weights(tmp_path):
    from tphyolo.models import build_model

    torch.manual_seed(0)
    model = build_model("yolov5n", num_classes=2)
    payload = {"model": model.state_dict(), "model_yaml": model.yaml, "names": ["car", "van"], "nc": 2}
    return save_checkpoint(tmp_path / "tiny.pt", payload)


@pytest.mark.slow
def test_export_writes_every_cpu_format_beside_the_weights(weights, capsys):
    argv = ["export", "--weights", str(weights), "--format", "onnx", "openvino", "torchscript", "--img", "64"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    folder = weights.parent
    paths = [folder / "tiny.onnx", folder / "tiny_openvino_model", folder / "tiny.torchscript"]
    assert (folder / "tiny_openvino_model" / "tiny.xml").is_file()
    assert (folder / "tiny_openvino_model" / "tiny.bin").is_file()
    for path in paths:
        assert f"{path} (" in out  # one summary line per file, with its relative error
        backend = load_backend(path, trust_code=True)  # the TorchScript file this test just wrote
        assert backend.names == ["car", "van"] and backend.metadata.model == "tiny"
        assert backend.metadata.source == "tiny.pt" and backend.imgsz == (64, 64)
    assert out.count("relative error vs PyTorch") == 3 and "ABOVE" not in out


def test_export_above_tolerance_exits_non_zero(weights, capsys, monkeypatch):
    monkeypatch.setattr("tphyolo.export.exporter.tolerance_for", lambda half: 1e-12)
    assert main(["export", "--weights", str(weights), "--img", "64"]) == 1
    captured = capsys.readouterr()
    assert "ABOVE TOLERANCE" in captured.out
    assert "tiny.onnx differs from PyTorch by" in captured.err and "above the tolerance 1e-12" in captured.err


def test_missing_weights_is_one_line(tmp_path, capsys):
    assert main(["export", "--weights", str(tmp_path / "missing.pt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing.pt" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where CUDA is absent")
def test_engine_refusal_is_one_line(weights, capsys):
    assert main(["export", "--weights", str(weights), "--format", "engine"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "TensorRT export needs a CUDA device" in err


def test_missing_extra_is_one_line_naming_it(weights, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "openvino", None)
    assert main(["export", "--weights", str(weights), "--format", "openvino"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and 'pip install "tphyolo[export]"' in err

"""ExportConfig, where files go, and the one-line refusals: fp16 off CUDA, TensorRT without CUDA/tensorrt,
missing packages of the export extra."""

import sys
from pathlib import Path

import pytest
import torch

from tphyolo.export import INSTALL_HINT, ExportConfig, MissingExtraError, export_model, load_backend
from tphyolo.export.exporter import output_paths
from tphyolo.export.parity import FP16_TOLERANCE, relative_error, sample_images
from tphyolo.imports import require
from tphyolo.models import build_model


def test_default_paths_are_beside_the_weights():
    cfg = ExportConfig(formats=("onnx", "openvino", "torchscript", "engine"))
    assert output_paths(cfg, Path("runs/w/best")) == {
        "onnx": Path("runs/w/best.onnx"),
        "openvino": Path("runs/w/best_openvino_model"),
        "torchscript": Path("runs/w/best.torchscript"),
        "engine": Path("runs/w/best.engine"),
    }


def test_out_is_the_file_for_one_format_and_the_folder_for_several():
    assert output_paths(ExportConfig(out="m.onnx"), Path("w/best")) == {"onnx": Path("m.onnx")}
    cfg = ExportConfig(formats=("onnx", "torchscript"), out="deploy")
    assert output_paths(cfg, Path("w/best")) == {
        "onnx": Path("deploy/best.onnx"),
        "torchscript": Path("deploy/best.torchscript"),
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"formats": ("onnx", "onnx")}, "listed twice"),
        ({"formats": ("tflite",)}, "--format must be one of .*, got .tflite."),
        ({"formats": ()}, "no export format given"),
        ({"opset": 13}, "--opset must be in \\[14, 20\\], got 13"),
        ({"opset": 99}, "--opset must be in \\[14, 20\\], got 99"),
        ({"batch": 0}, "--batch must be >= 1, got 0"),
        ({"imgsz": 100_000}, "--img must be in \\[1, 11584\\], got 100000"),
    ],
)
def test_bad_config_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ExportConfig(**kwargs)


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return build_model("yolov5n", num_classes=2)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_half_off_cuda_is_refused_before_tracing(tiny_model, tmp_path, fmt):
    with pytest.raises(ValueError, match=f"--half {fmt} export needs a CUDA --device") as error:
        export_model(tiny_model, ExportConfig(formats=(fmt,), half=True), stem=tmp_path / "w", model_name="n")
    assert "\n" not in str(error.value)
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where CUDA is absent")
def test_engine_without_cuda_says_what_is_missing(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="TensorRT export needs a CUDA device") as error:
        export_model(tiny_model, ExportConfig(formats=("engine",)), stem=tmp_path / "w", model_name="n")
    assert "\n" not in str(error.value)
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        assert "and the tensorrt package" in str(error.value)


def test_require_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxslim", None)  # makes `import onnxslim` fail
    with pytest.raises(MissingExtraError, match="--simplify needs the onnxslim package") as error:
        require("onnxslim", purpose="--simplify")
    assert INSTALL_HINT in str(error.value) and isinstance(error.value, ImportError)


@pytest.mark.parametrize(("module", "fmt"), [("onnx", "onnx"), ("onnxruntime", "onnx"), ("openvino", "openvino")])
def test_missing_extra_refuses_export_before_tracing(tiny_model, tmp_path, monkeypatch, module, fmt):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=f"needs the {module} package.*tphyolo\\[export\\]"):
        export_model(tiny_model, ExportConfig(formats=(fmt,)), stem=tmp_path / "w", model_name="n")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("module", "fmt"), [("onnxruntime", "onnx"), ("openvino", "openvino")])
def test_missing_runtime_refuses_loading(fixed_exports, monkeypatch, module, fmt):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=f"running .* models needs the {module} package"):
        load_backend(fixed_exports[fmt], trust_code=True)


@pytest.mark.slow
def test_half_openvino_is_an_fp16_ir_close_to_pytorch(tiny_model, tmp_path):
    cfg = ExportConfig(formats=("openvino",), imgsz=64, half=True)
    (result,) = export_model(tiny_model, cfg, stem=tmp_path / "h", model_name="n")
    assert result.tolerance == FP16_TOLERANCE and result.ok, result.summary()
    backend = load_backend(result.path, trust_code=True)
    assert backend.metadata.half and backend.dtype == torch.float32  # fp16 weights, fp32 input
    full = export_model(tiny_model, ExportConfig(formats=("openvino",), imgsz=64), stem=tmp_path / "f", model_name="n")
    bin_half, bin_full = (next(p.glob("*.bin")).stat().st_size for p in (result.path, full[0].path))
    assert bin_half < 0.6 * bin_full
    x = sample_images(1, 64, 64, seed=3)
    with torch.no_grad():
        expected = tiny_model.fuse()(x)
    assert 0 < relative_error(backend.run(x), expected) <= FP16_TOLERANCE  # fp16 weights: close, not equal


@pytest.mark.slow
def test_simplified_onnx_keeps_parity_and_metadata(tiny_model, tmp_path):
    import onnx

    cfg = ExportConfig(formats=("onnx",), imgsz=64, simplify=True)
    (result,) = export_model(tiny_model, cfg, stem=tmp_path / "s", model_name="n")
    assert result.ok, result.summary()
    plain = export_model(tiny_model, ExportConfig(formats=("onnx",), imgsz=64), stem=tmp_path / "p", model_name="n")
    nodes = [len(onnx.load(str(r.path)).graph.node) for r in (result, plain[0])]
    assert nodes[0] < nodes[1]  # onnxslim folded something
    assert load_backend(result.path, trust_code=True).names == ["0", "1"]


def test_a_checkpoint_exports_at_its_training_size_unless_told(tmp_path):
    """Without --img a checkpoint exports at the size it was trained at (as predict and val run it), at 640
    when it does not say, and the first line says which. Old behaviour: 640 always, so the README main job's
    model (trained at 320) exported to a file that scored mAP50 0.20 against its 0.84."""
    from tphyolo.checkpoint.format import save_checkpoint
    from tphyolo.export.exporter import export_checkpoint

    torch.manual_seed(0)
    model = build_model("yolov5n", names=["car"]).eval()
    payload = {"model": model.state_dict(), "model_yaml": model.yaml, "names": ["car"], "nc": 1}
    trained = save_checkpoint(tmp_path / "trained.pt", {**payload, "train_args": {"imgsz": 96, "model": "yolov5n"}})
    lines: list[str] = []
    (result,) = export_checkpoint(trained, ExportConfig(formats=("onnx",)), log=lines.append)
    assert load_backend(result.path, device=torch.device("cpu")).imgsz == (96, 96)
    assert lines[0] == "image size 96 (the checkpoint's training size; --img to choose)"
    lines.clear()
    (told,) = export_checkpoint(trained, ExportConfig(formats=("onnx",), imgsz=64, exist_ok=True), log=lines.append)
    assert load_backend(told.path, device=torch.device("cpu")).imgsz == (64, 64) and "image size" not in lines[0]
    silent = save_checkpoint(tmp_path / "silent.pt", payload)
    lines.clear()
    (default,) = export_checkpoint(silent, ExportConfig(formats=("onnx",)), log=lines.append)
    assert load_backend(default.path, device=torch.device("cpu")).imgsz == (640, 640)
    assert lines[0] == "image size 640 (the checkpoint does not say its training size; --img to choose)"

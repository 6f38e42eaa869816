"""Exports shared by the export tests: made once per session, in a temporary folder."""

from pathlib import Path

import pytest
import torch

from tphyolo.export import ExportConfig, export_model
from tphyolo.models import build_model

CPU_FORMATS = ("onnx", "openvino", "torchscript")
FIXED_SIZE = 64
DYNAMIC_SIZE = 128
DYNAMIC_NAMES = ["car", "van", "bus"]


@pytest.fixture(scope="session")
def fixed_exports(tmp_path_factory) -> dict[str, Path]:
    """yolov5n (random weights, seed 0) exported at a fixed 64 x 64, batch 1, to every CPU format:
    {format: path}, plus "model": the PyTorch model."""
    torch.manual_seed(0)
    model = build_model("yolov5n", names=[f"class{i}" for i in range(80)])
    folder = tmp_path_factory.mktemp("fixed")
    cfg = ExportConfig(formats=CPU_FORMATS, imgsz=FIXED_SIZE)
    results = export_model(model, cfg, stem=folder / "y5n", model_name="yolov5n", source="y5n.pt")
    assert all(r.ok for r in results), [r.summary() for r in results]
    return {"model": model, **{r.format: r.path for r in results}}


@pytest.fixture(scope="session")
def dynamic_exports(tmp_path_factory) -> dict[str, Path]:
    """yolov5n with 3 classes (random weights, seed 0) exported with `--dynamic` (traced at 128 x 128) to every
    CPU format: {format: path}, plus "model": the PyTorch model in eval mode."""
    torch.manual_seed(0)
    model = build_model("yolov5n", names=DYNAMIC_NAMES).eval()
    folder = tmp_path_factory.mktemp("dynamic")
    cfg = ExportConfig(formats=CPU_FORMATS, imgsz=DYNAMIC_SIZE, dynamic=True)
    results = export_model(model, cfg, stem=folder / "m", model_name="yolov5n", source="m.pt")
    assert all(r.ok for r in results), [r.summary() for r in results]
    return {"model": model, **{r.format: r.path for r in results}}

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


@pytest.fixture(scope="session")
def memorised_data(tiny_synthetic, tmp_path_factory) -> Path:
    """The 8 training scenes of `tiny_synthetic` as both splits: a model trained on them detects them, so an
    INT8 file's accuracy check has something to lose."""
    import yaml

    root = tiny_synthetic.parent
    path = tmp_path_factory.mktemp("memorised") / "data.yaml"
    names = yaml.safe_load(tiny_synthetic.read_text())["names"]
    path.write_text(yaml.safe_dump({"path": str(root), "train": "train/images", "val": "train/images", "names": names}))
    return path


@pytest.fixture(scope="session")
def int8_trained(memorised_data, tmp_path_factory):
    """`int8_trained(model, imgsz, epochs)`: the checkpoint of built-in `model` trained on `memorised_data` at
    `imgsz` px for `epochs` epochs of one step (no augmentation, a high learning rate), trained once per
    session. Weights that have seen images give the activation ranges and the confident
    detections that quantization is judged on; random weights give neither."""
    import yaml

    from tphyolo.runtime.config import RuntimeConfig
    from tphyolo.training.config import TrainConfig
    from tphyolo.training.hyp import load_hyp
    from tphyolo.training.trainer import Trainer

    folder = tmp_path_factory.mktemp("int8-trained")
    hyp = load_hyp("synthetic")
    hyp.update(lr0=0.01, lrf=0.5, warmup_epochs=0.0, weight_decay=0.0, hsv_v=0.0, translate=0.0, scale=0.0, fliplr=0.0)
    hyp_path = folder / "hyp.yaml"
    hyp_path.write_text(yaml.safe_dump(hyp))
    trained: dict[tuple[str, int, int], Path] = {}

    def train(model: str, imgsz: int, epochs: int) -> Path:
        key = (model, imgsz, epochs)
        if key not in trained:
            cfg = TrainConfig(
                data=str(memorised_data), model=model, hyp=str(hyp_path), imgsz=imgsz, batch=8, nominal_batch=8,
                epochs=epochs, workers=0, optimizer="AdamW", val=False, plots=False, warmup_min_steps=0,
                patience=0, autoanchor=False, project=str(folder), name=f"{model}-{imgsz}-{epochs}", seed=0,
            )  # fmt: skip
            trained[key] = Trainer(cfg, RuntimeConfig(device="cpu")).fit().best
        return trained[key]

    return train

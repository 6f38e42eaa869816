"""Exports shared by the export tests: made once per session, in a temporary folder."""

from pathlib import Path

import pytest
import torch
from tests.helpers import BLOCKS_SIZE, write_blocks

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
def blocks_data(tmp_path_factory) -> Path:
    """A data yaml of 16 block images at 64 px (`write_blocks`), the same images as train and val split: what
    the INT8 tests train, calibrate and score on."""
    import yaml

    root = tmp_path_factory.mktemp("blocks")
    write_blocks(root / "blocks", count=16, size=BLOCKS_SIZE, seed=0)
    data = {"path": str(root), "train": "blocks/images", "val": "blocks/images", "names": {0: "red", 1: "blue"}}
    (root / "data.yaml").write_text(yaml.safe_dump(data))
    return root / "data.yaml"


@pytest.fixture(scope="session")
def grey_calibration_data(blocks_data, tmp_path_factory) -> Path:
    """A data yaml whose train split is 4 flat grey images without objects and whose val split is
    `blocks_data`'s: an INT8 file calibrated on it learns ranges that the val images overflow."""
    import yaml

    root = tmp_path_factory.mktemp("grey")
    write_blocks(root / "grey", count=4, size=BLOCKS_SIZE, seed=0, grey=True)
    val = blocks_data.parent / "blocks" / "images"
    data = {"path": str(root), "train": "grey/images", "val": str(val), "names": {0: "red", 1: "blue"}}
    (root / "data.yaml").write_text(yaml.safe_dump(data))
    return root / "data.yaml"


@pytest.fixture(scope="session")
def int8_trained(blocks_data, tmp_path_factory):
    """`int8_trained(model, steps)`: the checkpoint of built-in `model` trained `steps` steps on `blocks_data`
    at 64 px (the whole set per step, no augmentation, a high learning rate), once per session. Weights that
    have seen images give the activation ranges and confident detections that quantization is judged on;
    random weights give neither."""
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
    trained: dict[tuple[str, int], Path] = {}

    def train(model: str, steps: int) -> Path:
        if (model, steps) not in trained:
            cfg = TrainConfig(
                data=str(blocks_data), model=model, hyp=str(hyp_path), imgsz=BLOCKS_SIZE, batch=16, nominal_batch=16,
                epochs=steps, workers=0, optimizer="AdamW", val=False, plots=False, warmup_min_steps=0,
                patience=0, project=str(folder), name=f"{model}-{steps}", seed=0,
            )  # fmt: skip
            # NCHW fp32, as the bounds of the INT8 tests were measured: left to the runtime probe, the layout and
            # precision (bf16 on CPUs that have it) vary by machine, and so would these weakly trained weights
            runtime = RuntimeConfig(device="cpu", amp="off", channels_last=False)
            trained[model, steps] = Trainer(cfg, runtime).fit().best
        return trained[model, steps]

    return train

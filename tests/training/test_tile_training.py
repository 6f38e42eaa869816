"""`tphyolo train --tile`: the validation inside training is sliced inference on the full val images at the tile
size with the merge that inference on the weights uses, so its number is the one `tphyolo val --slice` gives on
best.pt; the checkpoint records the tiles, and inference on it slices by default.

Before, the validation in training scored whole images letterboxed to the training size (no slicing), and
nothing in a checkpoint made inference slice.
"""

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.data.builtin.synthetic import generate_synthetic
from tphyolo.evaluation import loop as evaluation_loop
from tphyolo.evaluation.val import val
from tphyolo.infer.config import VALIDATION
from tphyolo.infer.slicing import SliceConfig
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.log import read_results
from tphyolo.training.trainer import Trainer

CPU = RuntimeConfig(device="cpu")
TINY_YAML = (Path(__file__).resolve().parents[2] / "src/tphyolo/configs/models/yolov5.yaml").read_text()
TILE = 64


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> Path:
    """3 training and 2 validation scenes of 160 px: 9 tiles of 64 px each."""
    return generate_synthetic(tmp_path_factory.mktemp("scenes"), n_train=3, n_val=2, imgsz=160, seed=2)


def test_training_on_tiles_validates_as_val_slice_scores_best(scenes, tmp_path, monkeypatch, caplog):
    seen = []  # (slicing, imgsz, merge) of each validation inside training
    evaluate = evaluation_loop.evaluate

    def spy(model, batches, *, config, settings, **kwargs):
        seen.append((settings.slicing, config.imgsz, config.merge))
        return evaluate(model, batches, config=config, settings=settings, **kwargs)

    monkeypatch.setattr(evaluation_loop, "evaluate", spy)
    model = tmp_path / "tiny.yaml"
    model.write_text(TINY_YAML.replace("width_multiple: 1.0", "width_multiple: 0.0625").replace(
        "depth_multiple: 1.0", "depth_multiple: 0.33"))  # fmt: skip
    cfg = TrainConfig(
        data=str(scenes),
        model=str(model),
        imgsz=TILE,
        batch=9,
        epochs=1,
        workers=0,
        tile=True,
        merge="nms",
        plots=False,
        warmup_min_steps=1,
        project=str(tmp_path),
        name="tiles",
    )
    with caplog.at_level(logging.INFO):
        result = Trainer(cfg, CPU, verbose=False).fit()  # verbose=False: no bars, the log records still come
    assert "training on tiles: 27 windows of 64 px per epoch from 3 images" in caplog.text
    assert seen == [(SliceConfig(TILE), TILE, "nms")]
    args = load_checkpoint(result.best).state["train_args"]
    assert (args["tile"], args["imgsz"], args["merge"]) == (True, TILE, "nms")
    row = {name: values[-1] for name, values in read_results(result.run_dir / "results.csv").items()}
    # the end of the run scores best.pt as `tphyolo val` does: sliced by default, as the checkpoint says
    assert "--slice 64: best.pt was trained on 64 px tiles and validated sliced (--merge nms)" in caplog.text
    assert result.final_metrics["metrics/mAP50"] == pytest.approx(row["metrics/mAP50"], abs=0.005)
    sliced = val(
        result.best,
        str(scenes),
        slicing=SliceConfig(TILE),
        runtime=CPU,
        inference=replace(VALIDATION, merge="nms", backend="pytorch"),
    )
    for name, value in (("metrics/mAP50", sliced.map50), ("metrics/mAP50-95", sliced.map),
                        ("metrics/precision", sliced.mp), ("metrics/recall", sliced.mr)):  # fmt: skip
        assert value == pytest.approx(row[name], abs=0.005), name

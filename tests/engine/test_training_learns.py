"""A short training on real VisDrone images learns: the loss falls and detections beat an untrained model's."""

from pathlib import Path

import pytest
import yaml

from tphyolo.engine.train_config import TrainConfig
from tphyolo.engine.train_log import read_results
from tphyolo.engine.trainer import Trainer
from tphyolo.runtime import RuntimeConfig

# The four visdrone-mini images with the largest objects (median box side 75-107 px at full resolution), so
# that the objects stay several pixels wide at the small training size a CPU test can afford.
IMAGES = (
    "0000006_01111_d_0000003",
    "9999942_00000_d_0000214",
    "9999951_00000_d_0000241",
    "0000006_01659_d_0000004",
)
NAMES = ["pedestrian", "people", "bicycle", "car", "van", "truck", "tricycle", "awning-tricycle", "bus", "motor"]


@pytest.fixture
def four_images(visdrone_mini: Path, tmp_path: Path) -> Path:
    listing = tmp_path / "images.txt"
    listing.write_text("".join(f"{visdrone_mini / 'images' / stem}.jpg\n" for stem in IMAGES))
    data = {"path": str(tmp_path), "train": "images.txt", "val": "images.txt", "names": dict(enumerate(NAMES))}
    (tmp_path / "data.yaml").write_text(yaml.safe_dump(data))
    return tmp_path / "data.yaml"


@pytest.mark.slow
def test_short_training_on_visdrone_learns(four_images, tmp_path):
    cfg = TrainConfig(
        data=str(four_images), model="tph-yolov5n", hyp="synthetic", imgsz=320, batch=4, epochs=40, workers=0,
        project=str(tmp_path / "runs"), name="learn", plots=False, warmup_min_steps=5, patience=0, seed=0,
    )  # fmt: skip
    runtime = RuntimeConfig(device="cpu")
    untrained = Trainer(cfg, runtime)
    untrained.setup()
    before = untrained.validate()["metrics/mAP50"]

    trainer = Trainer(TrainConfig.from_dict({**cfg.to_dict(), "name": "learn2"}), runtime)
    result = trainer.fit()
    columns = read_results(result.run_dir / "results.csv")
    parts = (columns["train/box_loss"], columns["train/obj_loss"], columns["train/cls_loss"])
    losses = [sum(v) for v in zip(*parts, strict=True)]
    assert losses[-1] < 0.6 * losses[0], losses
    after = max(columns["metrics/mAP50"])
    assert after > before + 0.2 and after > 5 * before, (before, after)

"""The training flags YOLOv5 users reach for: --freeze (a count or a list), --single-cls, --noval, --nosave."""

import math

import numpy as np
import pytest
import torch

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.commands.train import command_parser
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.loader import DatasetSettings, build_dataset
from tphyolo.flags import from_flags
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.log import read_results
from tphyolo.training.model.setup import build_model_for_training, check_freeze, freeze_layers, frozen_layer_indices
from tphyolo.training.trainer import Trainer

CPU = RuntimeConfig(device="cpu")


def test_freeze_is_a_count_or_a_list_of_layers():
    parse = lambda *argv: from_flags(TrainConfig, command_parser().parse_args(list(argv)))  # noqa: E731
    assert parse().freeze == (0,) and parse("--freeze", "10").freeze == (10,)
    assert parse("--freeze", "0", "1", "5").freeze == (0, 1, 5)
    assert TrainConfig(freeze=3).freeze == (3,)  # a number from Python, or from an older args.yaml
    assert frozen_layer_indices((3,)) == {0, 1, 2} and frozen_layer_indices((0, 1, 5)) == {0, 1, 5}
    assert frozen_layer_indices((0,)) == set()
    with pytest.raises(ValueError, match="--freeze must be >= 0, got -2"):
        TrainConfig(freeze=(1, -2))


def test_freezing_listed_layers_leaves_the_others_training():
    model = build_model_for_training("yolov5n", names=("a",))
    freeze_layers(model, (1, 3))
    frozen = {int(n.split(".")[1]) for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen == {1, 3}
    head = len(model.model) - 1
    check_freeze(model, (0, head - 1))
    with pytest.raises(ValueError, match=f"--freeze 0 {head}: layer {head} is not one to freeze.*{head} is the head"):
        check_freeze(model, (0, head))


def test_single_class_makes_every_object_class_0_and_the_model_one_class(tiny_synthetic, tmp_path):
    data = load_data_config(tiny_synthetic)
    many, _ = build_dataset(data, "train", DatasetSettings(imgsz=128, batch_size=4))
    one, _ = build_dataset(data, "train", DatasetSettings(imgsz=128, batch_size=4, single_class=True))
    classes = np.concatenate([r.labels.classes for r in many.records])
    assert len(set(classes.tolist())) > 1
    assert [len(r.labels.classes) for r in one.records] == [len(r.labels.classes) for r in many.records]
    assert not np.concatenate([r.labels.classes for r in one.records]).any()
    cfg = TrainConfig(data=str(tiny_synthetic), imgsz=128, batch=4, epochs=1, workers=0, plots=False,
                      project=str(tmp_path), single_cls=True)  # fmt: skip
    trainer = Trainer(cfg, CPU)
    assert trainer.names == ["item"] and trainer.model.nc == 1


@pytest.mark.slow
def test_noval_and_nosave_validate_and_write_at_the_end_only(tiny_synthetic, tmp_path, monkeypatch):
    cfg = TrainConfig(data=str(tiny_synthetic), imgsz=128, batch=4, epochs=2, workers=0, plots=False,
                      warmup_min_steps=1, project=str(tmp_path), val=False, save=False)  # fmt: skip
    trainer = Trainer(cfg, CPU)
    seen = []
    monkeypatch.setattr(Trainer, "validate", lambda self: pytest.fail("validated during --noval epochs"))
    epoch_runs = Trainer._run_epoch

    def run_epoch(self, epoch, log):
        seen.append(sorted(p.name for p in self.weights_dir.iterdir()))
        return epoch_runs(self, epoch, log)

    monkeypatch.setattr(Trainer, "_run_epoch", run_epoch)
    result = trainer.fit()
    assert seen == [[], []]  # nothing written before the end
    columns = read_results(result.run_dir / "results.csv")
    assert all(math.isnan(v) for v in columns["metrics/mAP50"] + columns["val/box_loss"])
    last, best = load_checkpoint(result.last), load_checkpoint(result.best)
    assert last.state["epoch"] == best.state["epoch"] == 1  # --noval: the latest weights are the best
    assert all(torch.equal(v, best.model[k]) for k, v in last.model.items())
    assert not math.isnan(result.final_metrics["metrics/mAP50"])  # the final validation of best.pt

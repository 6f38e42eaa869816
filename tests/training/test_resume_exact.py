"""A run interrupted and resumed trains on what the uninterrupted run trained on, batch for batch.

Both runs record, for every batch the loss function sees, the batch's targets and the loss. The interrupted run
stops with a KeyboardInterrupt (as Ctrl-C) raised from the loss of a chosen batch in the middle of an epoch;
`Trainer.resume` then continues from the last epoch it committed. The resumed run must see the batches the
uninterrupted run saw from there on (order, augmentation, multi-scale sizes) and compute the same losses, and
it must end with the same weights: gradients accumulated over the end of an epoch carry over the resume too.
"""

import contextlib
import logging
from pathlib import Path

import pytest
import torch

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.log import read_results
from tphyolo.training.trainer import Trainer

CPU = RuntimeConfig(device="cpu", deterministic=True)  # the exact path: bit-equal losses are the check
EPOCHS = 4
BATCHES_PER_EPOCH = 3  # 8 images in batches of 3
STOP_AT = (2, 1)  # (epoch, batch): the run stops in the middle of epoch 2, after last.pt of epoch 1
TINY_YAML = (Path(__file__).resolve().parents[2] / "src/tphyolo/configs/models/yolov5.yaml").read_text()


class Stop(KeyboardInterrupt):
    """Ctrl-C at a chosen batch."""


class RecordingLoss(torch.nn.Module):
    """The run's loss function, recording (epoch, batch, targets, loss items) of each call, and raising `Stop`
    at the call `stop_at` when given."""

    def __init__(self, loss_fn, records: list, stop_at: int | None = None) -> None:
        super().__init__()
        self.loss_fn, self.records, self.stop_at, self.calls = loss_fn, records, stop_at, 0

    def forward(self, preds, targets):
        if self.calls == self.stop_at:
            raise Stop
        self.calls += 1
        loss, items = self.loss_fn(preds, targets)
        self.records.append((targets.clone(), loss.detach().clone(), items.detach().clone()))
        return loss, items


class RecordingTrainer(Trainer):
    records: list
    stop_at: int | None = None

    def _build(self, resume_from):
        super()._build(resume_from)
        self.loss_fn = RecordingLoss(self.loss_fn, self.records, self.stop_at)


def _config(data: Path, project: Path, name: str) -> TrainConfig:
    model = project / "tiny.yaml"
    model.write_text(TINY_YAML.replace("width_multiple: 1.0", "width_multiple: 0.0625").replace(
        "depth_multiple: 1.0", "depth_multiple: 0.33"))  # fmt: skip
    # nbs 6 / batch 3: an optimiser step every 2 batches, so one is pending at the end of each 3-batch epoch
    return TrainConfig(
        data=str(data), model=str(model), imgsz=64, batch=3, nominal_batch=6, epochs=EPOCHS, workers=0,
        multi_scale=True, val=False, plots=False, warmup_min_steps=2, project=str(project), name=name,
    )  # fmt: skip


def _train(cfg: TrainConfig, *, stop_at: int | None = None) -> list:
    records: list = []
    trainer = type("Run", (RecordingTrainer,), {"records": records, "stop_at": stop_at})(cfg, CPU, verbose=False)
    with contextlib.suppress(Stop):
        trainer.fit()
    return records


def _resume(last: Path) -> list:
    records: list = []
    type("Resumed", (RecordingTrainer,), {"records": records}).resume(last, CPU, verbose=False).fit()
    return records


@pytest.mark.slow
def test_an_interrupted_and_resumed_run_equals_the_uninterrupted_run_batch_for_batch(tiny_synthetic, tmp_path, caplog):
    uninterrupted = _train(_config(tiny_synthetic, tmp_path, "whole"))
    assert len(uninterrupted) == EPOCHS * BATCHES_PER_EPOCH

    stop_epoch, stop_batch = STOP_AT
    cut = _config(tiny_synthetic, tmp_path, "cut")
    before = _train(cut, stop_at=stop_epoch * BATCHES_PER_EPOCH + stop_batch)
    last = tmp_path / "cut" / "weights" / "last.pt"
    assert load_checkpoint(last).state["epoch"] == stop_epoch - 1
    caplog.set_level(logging.INFO, logger="tphyolo")
    resumed = _resume(last)
    assert "recipe settings of the resumed run (hyp synthetic, AdamW, nbs 6)" in caplog.text

    first = stop_epoch * BATCHES_PER_EPOCH
    assert len(resumed) == len(uninterrupted) - first
    assert len(before) == first + stop_batch
    for (targets, loss, _), (targets0, loss0, _) in zip(before, uninterrupted, strict=False):
        assert torch.equal(targets, targets0) and torch.equal(loss, loss0)  # same settings, same start
    for i, ((targets, loss, items), (targets0, loss0, items0)) in enumerate(
        zip(resumed, uninterrupted[first:], strict=True)
    ):
        where = f"epoch {stop_epoch + i // BATCHES_PER_EPOCH} batch {i % BATCHES_PER_EPOCH}"
        assert torch.equal(targets, targets0), f"{where}: other targets (order or augmentation)"
        assert torch.equal(items, items0) and torch.equal(loss, loss0), f"{where}: loss {items} != {items0}"
    # the epochs differ from each other: a replay of epoch 0 at epoch 2 would not pass the loop above
    assert not torch.equal(uninterrupted[0][0], uninterrupted[first][0])

    whole, cut_rows = (read_results(tmp_path / name / "results.csv") for name in ("whole", "cut"))
    assert cut_rows["epoch"] == whole["epoch"] == [float(e) for e in range(EPOCHS)]
    for column in ("train/box_loss", "train/obj_loss", "train/cls_loss", "lr/pg0"):
        assert cut_rows[column] == whole[column], column
    final = [load_checkpoint(tmp_path / name / "weights" / "last.pt").model for name in ("whole", "cut")]
    assert all(torch.equal(value, final[1][key]) for key, value in final[0].items())

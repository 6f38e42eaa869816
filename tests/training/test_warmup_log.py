"""The warm-up is named where a newcomer reads the metrics: a line before the first epoch and a note on each
epoch line while it runs (a from-scratch model's mAP stays near 0 then, which otherwise reads as broken)."""

import logging

import pytest

from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.optim.optimization import warmup_note, warmup_plan
from tphyolo.training.trainer import Trainer


def test_the_note_counts_the_warmup_batches_and_ends_with_it():
    assert warmup_note(0, 10, 100) == "  warm-up 10/100 batches"
    assert warmup_note(90, 100, 100) == "  warm-up 100/100 batches, done"
    assert warmup_note(95, 105, 100) == "  warm-up 100/100 batches, done"  # the epoch that crosses the end
    assert warmup_note(100, 110, 100) == ""


def test_the_plan_gives_the_length_in_batches_and_epochs():
    line = warmup_plan(100, 10)
    assert line.startswith("warm-up: the first 100 batches (10.0 epochs) raise the learning rate from 0")
    assert "mAP" in line


@pytest.mark.slow
def test_epoch_lines_say_warm_up_until_it_ends(tiny_synthetic, tmp_path, caplog):
    # tiny_synthetic: 8 training images, batch 4 -> 2 batches per epoch; a warm-up of 3 batches ends in epoch 2
    cfg = TrainConfig(data=str(tiny_synthetic), imgsz=128, batch=4, epochs=3, workers=0, plots=False, val=False,
                      warmup_min_steps=3, project=str(tmp_path), name="run")  # fmt: skip
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        Trainer(cfg, RuntimeConfig(device="cpu")).fit()
    epochs = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch ")]
    assert len(epochs) == 3
    assert epochs[0].endswith("warm-up 2/3 batches")
    assert epochs[1].endswith("warm-up 3/3 batches, done")
    assert "warm-up" not in epochs[2]
    assert "warm-up: the first 3 batches (1.5 epochs)" in caplog.text

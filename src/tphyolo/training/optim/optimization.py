"""The optimisation of a training run: optimiser, learning-rate schedule, loss scaler, EMA, accumulation and
warm-up length, built together from the config, the hyperparameters and the model (rules in `training.optim.rules`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from tphyolo.flags import setting_name
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.optim.ema import ModelEMA
from tphyolo.training.optim.rules import (
    accumulation_steps,
    build_optimizer,
    lr_lambda,
    optimiser_steps,
    scaled_weight_decay,
)

LOGGER = logging.getLogger("tphyolo.train")


@dataclass(frozen=True)
class Optimization:
    """What steps the weights.

    lr_factor(epoch): the schedule's multiplier of lr0 (what `scheduler` applies at each epoch's end);
    ema: the averaged model on rank 0 (None on other ranks); accumulate: batches per optimiser step;
    warmup_steps: batches of warm-up. The objects are stateful; their states go into the checkpoint.
    """

    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    lr_factor: Callable[[int], float]
    scaler: torch.amp.GradScaler
    ema: ModelEMA | None
    accumulate: int
    warmup_steps: int


def build_optimization(
    cfg: TrainConfig,
    model: nn.Module,
    hyp: Mapping[str, float],
    *,
    batches_per_epoch: int,
    world_size: int,
    with_ema: bool,
    runtime: RuntimeConfig,
    device: torch.device,
) -> Optimization:
    """The optimisation of `model` (already on `device`, its frozen layers already frozen): parameter groups
    with weight decay scaled to the images per step, the linear or cosine (`cfg.cos_lr`) schedule from lr0 to
    lr0 * lrf, a GradScaler enabled when the runtime trains in fp16, an EMA when `with_ema` (rank 0), and a
    warm-up of `warmup_length` batches. `cfg` has its recipe resolved (`training.recipes.resolve_recipe`)."""
    if cfg.optimizer is None or cfg.nominal_batch is None:
        raise ValueError("the optimiser and nominal batch are unset: resolve the run's recipe first (resolve_recipe)")
    ema = ModelEMA(model) if with_ema else None
    accumulate = accumulation_steps(cfg.batch, world_size, nominal_batch=cfg.nominal_batch)
    weight_decay = scaled_weight_decay(hyp["weight_decay"], cfg.batch, world_size, nominal_batch=cfg.nominal_batch)
    optimizer = build_optimizer(
        model, name=cfg.optimizer, lr=hyp["lr0"], momentum=hyp["momentum"], weight_decay=weight_decay
    )
    lr_factor = lr_lambda(epochs=cfg.epochs, lrf=hyp["lrf"], cosine=cfg.cos_lr)
    return Optimization(
        optimizer=optimizer,
        scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lr_factor),
        lr_factor=lr_factor,
        scaler=torch.amp.GradScaler(device.type, enabled=runtime.needs_grad_scaler(device)),
        ema=ema,
        accumulate=accumulate,
        warmup_steps=warmup_length(hyp["warmup_epochs"], batches_per_epoch, cfg.warmup_min_steps, cfg.epochs),
    )


def warmup_length(warmup_epochs: float, batches_per_epoch: int, min_steps: int, epochs: int) -> int:
    """Batches of warm-up: `warmup_epochs` epochs but at least `min_steps` batches (YOLOv5's rule), and never
    more than half the run, so that a short run is not all warm-up (a 3-epoch run of 10 batches would otherwise
    end before its learning rate ever reached lr0). Runs of at least twice the warm-up are unaffected."""
    return min(max(round(warmup_epochs * batches_per_epoch), min_steps), max(1, epochs * batches_per_epoch // 2))


def warmup_plan(warmup_steps: int, batches_per_epoch: int, *, from_epochs: int | None = None,
                min_steps: int | None = None) -> str:  # fmt: skip
    """The line a run logs before its first epoch: how long the warm-up lasts and what it does to the metrics.
    `from_epochs`: the batches `warmup_epochs` alone gives; when `min_steps` (`--warmup-min-steps`) made the
    warm-up longer than that, the line says so, with the flag that sets it."""
    epochs = warmup_steps / max(batches_per_epoch, 1)
    why = ""
    if from_epochs is not None and min_steps is not None and warmup_steps > from_epochs:
        capped = ", capped at half the run" if warmup_steps < min_steps else ""
        why = (f" ({setting_name(TrainConfig, 'warmup_min_steps')} {min_steps}{capped}; warmup_epochs alone "
               f"would give {from_epochs})")  # fmt: skip
    return (
        f"warm-up: the first {warmup_steps} batches ({epochs:.1f} epochs) raise the learning rate from 0{why}; "
        "P, R and mAP often stay near 0 until the model finds its first objects"
    )


def warmup_note(steps_before: int, steps_after: int, warmup_steps: int) -> str:
    """What an epoch's line says about the warm-up, given the batches done before and after the epoch:
    `  warm-up 30/100 batches` while it runs, `  warm-up 100/100 batches, done` in the epoch that
    ends it, '' after."""
    if steps_before >= warmup_steps:
        return ""
    done = min(steps_after, warmup_steps)
    return f"  warm-up {done}/{warmup_steps} batches" + (", done" if done == warmup_steps else "")


def warn_if_few_steps(cfg: TrainConfig, optim: Optimization, *, batches_per_epoch: int, world_size: int) -> None:
    """Logs a warning when the nominal batch accumulates more batches than an epoch has (a tiny dataset with a
    recipe's nbs 64): the run then takes only a handful of optimiser steps."""
    if optim.accumulate <= batches_per_epoch:
        return
    steps = optimiser_steps(
        batches=cfg.epochs * batches_per_epoch, warmup_steps=optim.warmup_steps, accumulate=optim.accumulate
    )
    images = cfg.batch * world_size
    LOGGER.warning(
        "%d optimiser steps in this run: an epoch has %d batches of %d images, and --nbs %d accumulates %d of "
        "them per step; lower --nbs (--nbs %d steps every batch)",
        steps, batches_per_epoch, images, cfg.nominal_batch, optim.accumulate, images,
    )  # fmt: skip

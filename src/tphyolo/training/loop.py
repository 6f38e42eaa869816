"""One training epoch: warm-up, accumulation, mixed precision, loss scaling, gradient clipping and EMA.

`train_one_epoch` gets everything it uses as arguments (model, loss, loader, the run's `Optimization` --
optimiser, schedule, scaler, EMA, accumulation and warm-up --, the runtime and the process's place in a
distributed run, as an `EpochPlace`); the counters that outlive an epoch are a `StepState`; the optional
per-batch calls are `EpochHooks`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tphyolo.runtime.config import RuntimeConfig, autocast, sdpa_context
from tphyolo.runtime.distributed import DistContext
from tphyolo.training.optim.optimization import Optimization
from tphyolo.training.optim.rules import accumulation_at, apply_warmup

LOGGER = logging.getLogger("tphyolo.train")
MAX_NONFINITE_STEPS = 5
LOSS_NAMES = ("box", "obj", "cls")


class NonFiniteLossError(RuntimeError):
    """Training stopped because the loss was NaN/inf for several steps in a row."""


@dataclass
class StepState:
    """Counters that survive across epochs (and resumes)."""

    step: int = 0  # batches seen since the start of training
    last_opt_step: int = -1
    nonfinite_in_a_row: int = 0


@dataclass(frozen=True)
class EpochPlace:
    """Where an epoch runs: the process settings, the device and the process's place in a distributed run."""

    runtime: RuntimeConfig
    device: torch.device
    dist_ctx: DistContext


@dataclass(frozen=True)
class EpochHooks:
    """Optional calls around the batches of an epoch.

    `multi_scale_size(step) -> int | None` gives the long side for a batch (None keeps it);
    `progress(i, mean_items, batch)` updates a progress bar; `on_batch(i, batch)` is called after each batch
    (plots).
    """

    multi_scale_size: Callable[[int], int | None] | None = None
    progress: Callable[[int, torch.Tensor, Any], None] | None = None
    on_batch: Callable[[int, Any], None] | None = None


def train_one_epoch(
    model: nn.Module,
    loss_fn: nn.Module,
    loader: torch.utils.data.DataLoader,
    optim: Optimization,
    *,
    state: StepState,
    epoch: int,
    hyp: Mapping[str, float],
    place: EpochPlace,
    grad_clip: float = 0.0,
    hooks: EpochHooks = EpochHooks(),
) -> torch.Tensor:
    """Train for one pass over `loader` with `optim` (warm-up towards the schedule's factor for `epoch`) at
    `place`; returns the mean loss items (3,): box, obj, cls.

    Images go through `place.runtime.prepare_images` (dtype, memory format); `state` is advanced in place;
    `hooks` are called per batch (see EpochHooks).
    Raises NonFiniteLossError after MAX_NONFINITE_STEPS non-finite losses in a row.
    """
    runtime, device, dist_ctx = place.runtime, place.device, place.dist_ctx
    multi_scale_size, progress, on_batch = hooks.multi_scale_size, hooks.progress, hooks.on_batch
    optimizer, scaler, ema, accumulate, warmup_steps = (
        optim.optimizer, optim.scaler, optim.ema, optim.accumulate, optim.warmup_steps
    )
    epoch_factor = optim.lr_factor(epoch)
    model.train()
    mean_items = torch.zeros(3, device=device)
    for i, batch in enumerate(loader):
        step = state.step
        accumulate_now = accumulation_at(step, warmup_steps=warmup_steps, accumulate=accumulate)
        if step <= warmup_steps:
            apply_warmup(optimizer, step=step, warmup_steps=warmup_steps, epoch_factor=epoch_factor, hyp=hyp)
        if multi_scale_size is not None:
            size = multi_scale_size(step)
            if size is not None:
                batch = batch.resized(size)
        batch = batch.to(device, non_blocking=True)
        images = runtime.prepare_images(batch.images, device, training=True)  # (B, 3, H, W) in [0, 1]
        with autocast(runtime, device), sdpa_context(runtime):
            preds = model(images)
        loss, items = loss_fn([p.float() for p in preds], batch.targets)
        if dist_ctx.distributed:
            loss = loss * dist_ctx.world_size  # DDP averages gradients over processes

        if not torch.isfinite(loss).all():
            state.nonfinite_in_a_row += 1
            LOGGER.warning("epoch %d batch %d: non-finite loss %s, step skipped", epoch, i, items.tolist())
            optimizer.zero_grad(set_to_none=True)
            if state.nonfinite_in_a_row >= MAX_NONFINITE_STEPS:
                raise NonFiniteLossError(
                    f"the loss was NaN/inf for {MAX_NONFINITE_STEPS} batches in a row (epoch {epoch}); lower lr0, "
                    "check the labels (tphyolo data check) or train without --amp fp16"
                )
            state.step += 1
            continue
        state.nonfinite_in_a_row = 0
        scaler.scale(loss).backward()

        if step - state.last_opt_step >= accumulate_now:
            if grad_clip > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            if ema is not None:
                ema.update(model)
            state.last_opt_step = step

        mean_items = (mean_items * i + items.detach()) / (i + 1)
        state.step += 1
        if progress is not None:
            progress(i, mean_items, batch)
        if on_batch is not None:
            on_batch(i, batch)
    return mean_items

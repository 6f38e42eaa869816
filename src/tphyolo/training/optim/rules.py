"""Optimiser, learning-rate schedule and warm-up, with YOLOv5's semantics made explicit.

Parameter groups: 0 = norm weights (no weight decay), 1 = other weights (weight decay), 2 = biases (no decay).
Weight decay is scaled for gradient accumulation to a nominal batch of 64. Adam/AdamW use `lr0` (the original
silently hard-coded 3e-4 for Adam) and `momentum` as beta1.

Where the groups differ from YOLOv5 v6.0, whose rule is by attribute name (a BatchNorm2d's `weight` -> 0, any
other `weight` -> 1, any `bias` -> 2, nothing else optimised): the weights of every normalisation layer, the
LayerNorms of the transformer and Swin blocks included, are not decayed (v6.0 decays them), as transformers
are usually trained; and every parameter that requires grad is optimised. v6.0 leaves out parameters named
neither `weight` nor `bias`, so the original TPH-YOLOv5 never trained nn.MultiheadAttention's input projection
(`in_proj_weight`, `in_proj_bias`) nor the Swin relative-position bias table. Here that projection is folded
with q/k/v into one `qkv` Linear (weight in group 1, bias in group 2), which cannot train one factor and not
the other; bare parameters such as the bias table go to group 1 when at least 2-D, else to group 0. Warm-up
also moves Adam's beta1 (v6.0: SGD momentum only) and grows the accumulation towards the rounded
`accumulation_steps` (v6.0: towards nbs / batch). `tests/training/test_optim.py` pins each of these.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import nn

from tphyolo.errors import InputError
from tphyolo.training.config import OPTIMIZERS

NOMINAL_BATCH = 64


def accumulation_steps(batch_size: int, world_size: int = 1, *, nominal_batch: int = NOMINAL_BATCH) -> int:
    """Batches to accumulate so that one optimiser step sees about `nominal_batch` images."""
    return max(round(nominal_batch / (batch_size * world_size)), 1)


def scaled_weight_decay(
    weight_decay: float, batch_size: int, world_size: int = 1, *, nominal_batch: int = NOMINAL_BATCH
) -> float:
    """Weight decay scaled by the images per optimiser step relative to NOMINAL_BATCH (the batch size the
    hyperparameters were tuned for), whatever `nominal_batch` the run accumulates to."""
    accumulate = accumulation_steps(batch_size, world_size, nominal_batch=nominal_batch)
    return weight_decay * batch_size * world_size * accumulate / NOMINAL_BATCH


def parameter_groups(model: nn.Module) -> tuple[list, list, list]:
    """(norm weights, decayed weights, biases) among the parameters that require gradients."""
    norm_types = tuple(v for k, v in vars(nn).items() if "Norm" in k and isinstance(v, type))
    no_decay, decay, biases = [], [], []
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if not param.requires_grad:
                continue
            if name == "bias":
                biases.append(param)
            elif isinstance(module, norm_types) or param.ndim <= 1:
                no_decay.append(param)
            else:
                decay.append(param)
    return no_decay, decay, biases


def build_optimizer(
    model: nn.Module, *, name: str, lr: float, momentum: float, weight_decay: float
) -> torch.optim.Optimizer:
    """The optimiser with the three parameter groups (see module docstring); `weight_decay` already scaled."""
    no_decay, decay, biases = parameter_groups(model)
    groups = [
        {"params": no_decay, "weight_decay": 0.0},
        {"params": decay, "weight_decay": weight_decay},
        {"params": biases, "weight_decay": 0.0},
    ]
    if name == "SGD":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=True)
    if name == "Adam":
        return torch.optim.Adam(groups, lr=lr, betas=(momentum, 0.999))
    if name == "AdamW":
        return torch.optim.AdamW(groups, lr=lr, betas=(momentum, 0.999))
    raise InputError(f"unknown optimizer {name!r}; choose from {OPTIMIZERS}")


def lr_lambda(*, epochs: int, lrf: float, cosine: bool) -> Callable[[int], float]:
    """Multiplier of lr0 at an epoch: linear from 1 to lrf over the run, or a half cosine from 1 to lrf."""
    if cosine:
        return lambda epoch: ((1 - math.cos(epoch * math.pi / epochs)) / 2) * (lrf - 1) + 1
    return lambda epoch: (1 - epoch / max(epochs - 1, 1)) * (1.0 - lrf) + lrf


def apply_warmup(
    optimizer: torch.optim.Optimizer,
    *,
    step: int,
    warmup_steps: int,
    epoch_factor: float,
    hyp: Mapping[str, float],
) -> None:
    """Warm-up for the first `warmup_steps` batches: the bias lr falls from warmup_bias_lr to its scheduled
    value, other lrs rise from 0, and momentum (or Adam's beta1) rises from warmup_momentum to momentum."""
    xi = [0, warmup_steps]
    for index, group in enumerate(optimizer.param_groups):
        start = hyp["warmup_bias_lr"] if index == 2 else 0.0
        group["lr"] = float(np.interp(step, xi, [start, group["initial_lr"] * epoch_factor]))
        momentum = float(np.interp(step, xi, [hyp["warmup_momentum"], hyp["momentum"]]))
        if "momentum" in group:
            group["momentum"] = momentum
        elif "betas" in group:
            group["betas"] = (momentum, group["betas"][1])


def warmup_accumulation(*, step: int, warmup_steps: int, accumulate: int) -> int:
    """During warm-up the accumulation grows from 1 to its full value."""
    return max(1, int(np.interp(step, [0, warmup_steps], [1, accumulate]).round()))


def accumulation_at(step: int, *, warmup_steps: int, accumulate: int) -> int:
    """Batches the optimiser step after batch `step` waits for: growing during warm-up, then `accumulate`."""
    if step <= warmup_steps:
        return warmup_accumulation(step=step, warmup_steps=warmup_steps, accumulate=accumulate)
    return accumulate


def optimiser_steps(*, batches: int, warmup_steps: int, accumulate: int) -> int:
    """How many optimiser steps a run of `batches` batches takes, by the training loop's rule (a step when
    `accumulation_at` batches have passed since the last one)."""
    steps, last = 0, -1
    for step in range(batches):
        if step - last >= accumulation_at(step, warmup_steps=warmup_steps, accumulate=accumulate):
            steps, last = steps + 1, step
    return steps

"""Exponential moving average of a model's weights, used for validation and checkpoints."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside DistributedDataParallel / DataParallel / torch.compile wrappers."""
    while True:
        if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            model = model.module
        elif hasattr(model, "_orig_mod"):  # torch.compile's OptimizedModule
            model = model._orig_mod
        else:
            return model


class ModelEMA:
    """Keeps `ema`, a copy of the model whose floating-point state (parameters and buffers) follows
    `ema = d * ema + (1 - d) * model` after every optimiser step.

    The decay ramps up as d = decay * (1 - exp(-updates / tau)), so early, fast-changing weights are
    averaged over few steps. `updates` is part of the resumable state.
    """

    def __init__(self, model: nn.Module, *, decay: float = 0.9999, tau: float = 2000.0, updates: int = 0) -> None:
        self.ema = copy.deepcopy(unwrap(model)).eval()
        for p in self.ema.parameters():
            p.requires_grad_(False)
        self.decay = decay
        self.tau = tau
        self.updates = updates

    def current_decay(self) -> float:
        return self.decay * (1 - math.exp(-self.updates / self.tau))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Fold the model's current weights into the average (call after each optimiser step)."""
        self.updates += 1
        d = self.current_decay()
        source = unwrap(model).state_dict()
        for name, value in self.ema.state_dict().items():
            if value.dtype.is_floating_point:
                value.mul_(d).add_(source[name].detach().to(value.dtype), alpha=1 - d)
            else:
                value.copy_(source[name])

    def state_dict(self) -> dict:
        return {"ema": self.ema.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.ema.load_state_dict(state["ema"])
        self.updates = int(state["updates"])

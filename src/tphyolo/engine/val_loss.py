"""The training loss on the validation split, measured during the validation pass itself (no second pass).

YOLOv5 logs val/box_loss, val/obj_loss and val/cls_loss: the gap between them and the training losses is
what shows over-fitting. A forward hook on the model's detection head takes the head's input maps of each
validation batch, re-runs the head's level predictions on them (the raw maps the loss reads; cheap next to the
backbone) and scores them against the batch's targets.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn


class ValLoss:
    """Use: `tracker = ValLoss(model, loss_fn)`; `evaluate(model, tracker.batches(loader), ...)`;
    `tracker.mean()` is the loss items (box, obj, cls) averaged over the batches (zeros for none).

    `model` is the module the evaluation runs (its head is found as the loss finds it); `loss_fn` a YoloLoss
    for that model, called as in training with raw maps [(B, na, H, W, no)] * nl and targets (n, 6)."""

    def __init__(self, model: nn.Module, loss_fn: nn.Module) -> None:
        from tphyolo.engine.loss import _find_head

        self.head, self.loss_fn = _find_head(model), loss_fn
        self.total: torch.Tensor | None = None
        self.count = 0
        self._raw: list[torch.Tensor] | None = None

    def _capture(self, head: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        with torch.no_grad():
            self._raw = head.raw_maps(args[0])  # (B, na, H, W, no) per level

    def batches(self, loader: Iterable) -> Iterator[Any]:
        """`loader`'s batches, each scored once the evaluation has run the model on it."""
        handle = self.head.register_forward_hook(self._capture)
        try:
            for batch in loader:
                self._raw = None
                yield batch
                if self._raw is not None:
                    targets = batch.targets.to(self._raw[0].device)
                    with torch.no_grad():
                        _, items = self.loss_fn(self._raw, targets)
                    items = items.detach().float().cpu()
                    self.total = items if self.total is None else self.total + items
                    self.count += 1
        finally:
            handle.remove()

    def mean(self) -> torch.Tensor:
        """(3,) the mean box, obj and cls loss over the scored batches."""
        return self.total / self.count if self.total is not None else torch.zeros(3)

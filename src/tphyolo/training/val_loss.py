"""The training loss on the validation split, measured during the validation pass itself (no second pass).

YOLOv5 logs val/box_loss, val/obj_loss and val/cls_loss: the gap between them and the training losses is
what shows over-fitting. Forward hooks on the detection head's output convolutions (`output_convs`, whose
outputs are the head's level predictions by its contract) keep what the evaluation's own forward computed; each
validation batch's maps are reshaped to the raw maps the loss reads (`DetectionHead.raw_map`) and scored against
the batch's targets. Nothing of the head runs twice (TPH-YOLOv5++'s first level is a cross-layer attention block).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import nn


class ValLoss:
    """Use: `tracker = ValLoss(model, loss_fn)`; `evaluate(model, tracker.batches(loader), ...)`;
    `tracker.mean()` is the loss items (box, obj, cls) averaged over the batches (zeros for none).

    `model` is the module the evaluation runs (its head is found as the loss finds it); `loss_fn` a YoloLoss
    for that model, called as in training with raw maps [(B, na, H, W, no)] * nl and targets (n, 6)."""

    def __init__(self, model: nn.Module, loss_fn: nn.Module) -> None:
        from tphyolo.training.loss import _find_head

        self.head, self.loss_fn = _find_head(model), loss_fn
        self.total: torch.Tensor | None = None
        self.count = 0
        self._maps: dict[int, torch.Tensor] = {}  # level -> its output convolution's last output

    def _keeper(self, level: int) -> Callable[[nn.Module, tuple[Any, ...], torch.Tensor], None]:
        def keep(conv: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
            self._maps[level] = output.detach()

        return keep

    def batches(self, loader: Iterable) -> Iterator[Any]:
        """`loader`'s batches, each scored once the evaluation has run the model on it."""
        convs = self.head.output_convs()
        handles = [conv.register_forward_hook(self._keeper(level)) for level, conv in enumerate(convs)]
        try:
            for batch in loader:
                self._maps = {}
                yield batch
                if len(self._maps) == len(convs):
                    raw = [self.head.raw_map(self._maps[level]) for level in range(len(convs))]  # (B, na, H, W, no)
                    with torch.no_grad():
                        _, items = self.loss_fn(raw, batch.targets.to(raw[0].device))
                    items = items.detach().float().cpu()
                    self.total = items if self.total is None else self.total + items
                    self.count += 1
        finally:
            for handle in handles:
                handle.remove()

    def mean(self) -> torch.Tensor:
        """(3,) the mean box, obj and cls loss over the scored batches."""
        return self.total / self.count if self.total is not None else torch.zeros(3)

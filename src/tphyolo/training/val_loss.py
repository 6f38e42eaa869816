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

from tphyolo.runtime.sharding import Shard
from tphyolo.training.loss import _find_head


class ValLoss:
    """Use: `tracker = ValLoss(model, loss_fn)`; `evaluate(model, tracker.batches(loader), ...)`;
    `tracker.mean()` is the loss items (box, obj, cls) averaged over the batches (zeros for none).

    `model` is the module the evaluation runs (its head is found as the loss finds it); `loss_fn` a YoloLoss
    for that model, called as in training with raw maps [(B, na, H, W, no)] * nl and targets (n, 6).
    `sliced`: the evaluation runs the model on windows of the images, not on the batch: nothing is scored and
    `mean` is nan."""

    def __init__(self, model: nn.Module, loss_fn: nn.Module, *, sliced: bool = False) -> None:
        self.head, self.loss_fn, self.sliced = _find_head(model), loss_fn, sliced
        self.items: list[torch.Tensor | None] = []  # per batch of the loader: its loss items, None if not scored
        self._maps: dict[int, torch.Tensor] = {}  # level -> its output convolution's last output

    def _keeper(self, level: int) -> Callable[[nn.Module, tuple[Any, ...], torch.Tensor], None]:
        def keep(conv: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
            self._maps[level] = output.detach()

        return keep

    def batches(self, loader: Iterable) -> Iterator[Any]:
        """`loader`'s batches, each scored once the evaluation has run the model on it."""
        if self.sliced:
            yield from loader
            return
        convs = self.head.output_convs()
        handles = [conv.register_forward_hook(self._keeper(level)) for level, conv in enumerate(convs)]
        try:
            for batch in loader:
                self._maps = {}
                yield batch
                self.items.append(None)
                if len(self._maps) == len(convs):
                    raw = [self.head.raw_map(self._maps[level]) for level in range(len(convs))]  # (B, na, H, W, no)
                    with torch.no_grad():
                        _, items = self.loss_fn(raw, batch.targets.to(raw[0].device))
                    self.items[-1] = items.detach().float().cpu()
        finally:
            for handle in handles:
                handle.remove()

    def mean(self, shard: Shard | None = None) -> torch.Tensor:
        """(3,) the mean box, obj and cls loss over the scored batches, summed in batch order. With the `shard`
        of a distributed evaluation (every rank calls this), over the batches of every rank, summed in their
        one-process order: rank 0's answer, the other ranks get that of their own batches."""
        if self.sliced:
            return torch.full((3,), float("nan"))
        items = self.items
        if shard is not None and shard.ctx.distributed:
            batches = Shard.of(shard.units, unit=1, ctx=shard.ctx)  # loader batch j of rank r is batch r + jW
            items = batches.gather(items) or items
        total, count = None, 0
        for value in items:
            if value is not None:
                total, count = (value if total is None else total + value), count + 1
        return total / count if total is not None else torch.zeros(3)

"""The original-strategy loss (benchmarks/original_loss.py) that benchmarks/model_vs_original.py measures against
gives YoloLoss's numbers and gradients."""

from __future__ import annotations

import pytest
import torch
from tests.helpers import benchmark_script

from tphyolo.training.hyp import load_hyp, scale_hyp
from tphyolo.training.loss import YoloLoss

OriginalLoss = benchmark_script("original_loss").OriginalLoss


def _loss(num_classes: int, hyp: str = "scratch-low", **changes: float) -> YoloLoss:
    anchors = torch.tensor([[[1.25, 1.6], [2.0, 3.75], [4.1, 2.9]], [[1.9, 3.8], [3.9, 2.8], [3.7, 7.4]]])
    scaled = {**scale_hyp(load_hyp(hyp), num_levels=2, num_classes=num_classes, imgsz=128), **changes}
    return YoloLoss(anchors=anchors, strides=[8, 16], num_classes=num_classes, hyp=scaled)


def _inputs(seed: int, num_targets: int, num_classes: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    preds = [torch.randn(2, 3, s, s, 5 + num_classes, generator=gen) for s in (16, 8)]
    wh = torch.rand(num_targets, 2, generator=gen) * 0.3 + 0.02
    targets = torch.cat(
        [
            torch.randint(0, 2, (num_targets, 1), generator=gen).float(),
            torch.randint(0, num_classes, (num_targets, 1), generator=gen).float(),
            wh / 2 + torch.rand(num_targets, 2, generator=gen) * (1 - wh),
            wh,
        ],
        1,
    )
    return preds, targets


@pytest.mark.parametrize(
    ("num_targets", "num_classes", "changes"),
    [(12, 5, {}), (30, 1, {}), (9, 4, {"fl_gamma": 1.5, "label_smoothing": 0.1}), (0, 3, {})],
)
def test_same_loss_and_gradient_as_yolo_loss(num_targets: int, num_classes: int, changes: dict) -> None:
    loss_fn = _loss(num_classes, **changes)
    preds, targets = _inputs(num_targets, num_targets, num_classes)
    results = []
    for fn in (loss_fn, OriginalLoss(loss_fn)):
        leaves = [p.clone().requires_grad_(True) for p in preds]
        loss, items = fn(leaves, targets)
        loss.backward()
        results.append((loss, items, [p.grad for p in leaves]))
    (loss, items, grads), (ref_loss, ref_items, ref_grads) = results
    assert loss.item() > 0 and items[1] > 0
    assert (items[0] > 0) == (num_targets > 0)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=0)
    torch.testing.assert_close(items, ref_items, rtol=1e-5, atol=1e-8)
    for grad, ref in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(grad, ref, rtol=1e-4, atol=1e-7)


def test_autobalance_is_refused() -> None:
    anchors = torch.ones(3, 1, 2)
    hyp = scale_hyp(load_hyp("scratch-low"), num_levels=3, num_classes=2, imgsz=128)
    loss_fn = YoloLoss(anchors=anchors, strides=[8, 16, 32], num_classes=2, hyp=hyp, autobalance=True)
    with pytest.raises(ValueError, match="autobalance"):
        OriginalLoss(loss_fn)

"""The loss's memory is bounded by design: above TARGET_CHUNK targets it works chunk by chunk under
checkpointing, with the same loss and gradients as all at once, keeping for the backward pass no more than
one chunk keeps."""

from __future__ import annotations

import torch

from tphyolo.training import loss as loss_module
from tphyolo.training.loss import YoloLoss

HYP = {"box": 0.05, "obj": 1.0, "cls": 0.5, "cls_pw": 1.0, "obj_pw": 1.0, "fl_gamma": 1.5, "anchor_t": 4.0}
STRIDES = (4, 8, 16, 32)


def _case(num_targets: int, *, seed: int = 0):
    """Raw head outputs of a 2-image batch at 64 px (4 levels, 3 anchors, 5 classes) and random targets."""
    generator = torch.Generator().manual_seed(seed)
    preds = [torch.randn(2, 3, 64 // s, 64 // s, 10, generator=generator).requires_grad_() for s in STRIDES]
    targets = torch.rand(num_targets, 6, generator=generator)
    targets[:, 0] = torch.randint(0, 2, (num_targets,), generator=generator)
    targets[:, 1] = torch.randint(0, 5, (num_targets,), generator=generator)
    targets[:, 4:] = targets[:, 4:] * 0.3 + 0.02
    return preds, targets


def _loss() -> YoloLoss:
    anchors = torch.tensor([[[1.0, 1.5], [2.0, 1.0], [2.5, 3.0]]] * len(STRIDES))
    return YoloLoss(anchors=anchors, strides=STRIDES, num_classes=5, hyp=HYP, autobalance=True)


def test_chunks_give_the_loss_and_gradients_of_all_targets_at_once(monkeypatch):
    preds, targets = _case(200)
    whole = _loss()
    total, items = whole(preds, targets)
    grads = torch.autograd.grad(total, preds)
    monkeypatch.setattr(loss_module, "TARGET_CHUNK", 48)  # 5 chunks, the last one partial
    chunked = _loss()
    total_c, items_c = chunked(preds, targets)
    grads_c = torch.autograd.grad(total_c, preds)
    torch.testing.assert_close(total_c, total, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(items_c, items, rtol=1e-5, atol=1e-6)
    for g_c, g in zip(grads_c, grads, strict=True):
        torch.testing.assert_close(g_c, g, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(chunked.balance, whole.balance)  # autobalance updated once per call


def _kept_for_backward_mib(loss: YoloLoss, num_targets: int) -> float:
    """MiB of the tensors autograd keeps from the loss's forward until its backward (counted as they are saved:
    deterministic, whatever the machine)."""
    preds, targets = _case(num_targets)
    kept = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal kept
        kept += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        total, _ = loss(preds, targets)
    total.backward()
    return kept / 2**20


def test_what_the_backward_keeps_is_bounded_by_one_chunk(monkeypatch):
    """All at once, 8 chunks' worth of targets keep 8 times what one chunk keeps; chunked, less than one."""
    monkeypatch.setattr(loss_module, "TARGET_CHUNK", 64)
    one, chunked = _kept_for_backward_mib(_loss(), 64), _kept_for_backward_mib(_loss(), 512)
    monkeypatch.setattr(loss_module, "TARGET_CHUNK", 512)
    whole = _kept_for_backward_mib(_loss(), 512)
    assert chunked < one < whole / 7, (one, chunked, whole)

"""CLLABlock with its input convolution folded into the attention's key and value maps, against the
unfolded order (conv1, conv2, CLLA, det) in values and gradients."""

from __future__ import annotations

import pytest
import torch

from tphyolo.models.clla import CLLABlock

CASES = [(2, (16, 20), (8, 10)), (2, (15, 17), (7, 8)), (4, (12, 16), (6, 8))]  # size, fine map, coarse map


def unfolded(block: CLLABlock, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    return block.det(block.att(block.conv1(x1), block.conv2(x2)))


@pytest.mark.parametrize(("size", "fine", "coarse"), CASES)
def test_folded_block_matches_the_unfolded_order(size: int, fine: tuple[int, int], coarse: tuple[int, int]) -> None:
    torch.manual_seed(0)
    block = CLLABlock(16, 8, 24, 15, size=size)
    names = [name for name, _ in block.named_parameters()]
    x1 = torch.randn(2, 8, *fine, requires_grad=True)
    x2 = torch.randn(2, 24, *coarse, requires_grad=True)
    upstream = torch.randn(2, 15, *coarse)
    results = []
    for forward in (block, lambda a, b: unfolded(block, a, b)):
        block.zero_grad()
        x1.grad = x2.grad = None
        out = forward(x1, x2)
        (out * upstream).sum().backward()
        grads = {
            "x1": x1.grad.clone(),
            "x2": x2.grad.clone(),
            **{n: p.grad.clone() for n, p in block.named_parameters()},
        }
        results.append((out.detach(), grads))
    (out, grads), (ref, ref_grads) = results
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    for name, expected in ref_grads.items():
        torch.testing.assert_close(grads[name], expected, rtol=1e-4, atol=1e-4, msg=name)
    assert all(grads[name].abs().sum() > 0 for name in names if name != "att.k.bias")  # k's bias cancels


def test_folded_maps_are_kept_without_gradients_until_a_parameter_changes() -> None:
    torch.manual_seed(0)
    block = CLLABlock(16, 8, 24, 15).eval()
    x1, x2 = torch.randn(2, 8, 16, 20), torch.randn(2, 24, 8, 10)
    with torch.inference_mode():
        block(x1, x2)
        first = block.folded()
        assert block.folded() is first  # reused
    for name in ("conv1.weight", "att.q.bias", "att.k.weight", "att.v.bias"):
        with torch.no_grad():
            block.get_parameter(name).mul_(1.5)  # as an optimiser step or an EMA update does
            torch.testing.assert_close(block(x1, x2), unfolded(block, x1, x2), rtol=1e-5, atol=1e-5, msg=name)
    block.train()
    block(x1, x2).sum().backward()  # maps built under inference mode do not leak into a graph
    assert block.att.q.weight.grad is not None and block.conv1.weight.grad is not None

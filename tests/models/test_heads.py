"""Detect head: contract checks, grid caching, bias priors with class frequencies, float32 decoding."""

from __future__ import annotations

import math

import pytest
import torch

from tphyolo.models.heads import Detect

ANCHORS = [[4, 6, 8, 14], [16, 30, 30, 22]]


def head_with_strides() -> Detect:
    torch.manual_seed(0)
    head = Detect(3, ANCHORS, [8, 16])
    head.set_stride_(torch.tensor([8.0, 16.0]))
    head.set_anchors_(head.anchors / head.stride.view(-1, 1, 1))
    return head


def test_contract_attributes() -> None:
    head = head_with_strides()
    assert (head.nc, head.no, head.nl, head.na) == (3, 8, 2, 2)
    assert head.anchors.shape == (2, 2, 2)
    assert "anchors" in head.state_dict() and "stride" not in head.state_dict()
    assert Detect.num_levels(4) == 4


def test_mismatched_inputs_and_anchors() -> None:
    with pytest.raises(ValueError, match="3 input maps but 2 anchor levels"):
        Detect(3, ANCHORS, [8, 16, 32])
    with pytest.raises(ValueError, match="anchors must be nl lists"):
        Detect(3, [[4, 6, 8], [16, 30, 30]], [8, 16])
    with pytest.raises(ValueError, match=r"anchors must have shape \(2, 2, 2\)"):
        head_with_strides().set_anchors_(torch.ones(2, 3, 2))


def test_grids_follow_size_and_anchor_changes() -> None:
    head = head_with_strides().eval()
    small = [torch.randn(1, 8, 4, 6), torch.randn(1, 16, 2, 3)]
    large = [torch.randn(1, 8, 6, 4), torch.randn(1, 16, 3, 2)]
    out_small = head(small)
    out_large = head(large)  # a new size: new grids, not the cached ones
    assert out_small.shape == out_large.shape == (1, 2 * (24 + 6), 8)
    # Last cell of level 0, anchor 0, in the (6 rows, 4 columns) map: x offset 3, y offset 5.
    p = head.predict_levels(large)[0].view(1, 2, 8, 6, 4)[0, 0, :2, 5, 3].sigmoid()
    torch.testing.assert_close(out_large[0, 23, :2], (p * 2 - 0.5 + torch.tensor([3.0, 5.0])) * 8)
    head.set_anchors_(head.anchors * 2)  # wh doubles: cached anchor grids are dropped
    torch.testing.assert_close(head(large)[..., 2:4], out_large[..., 2:4] * 2)


def test_half_precision_decodes_in_float32() -> None:
    head = head_with_strides().eval()
    maps = [torch.randn(1, 8, 4, 6), torch.randn(1, 16, 2, 3)]
    ref = head(maps)
    out = head.to(torch.bfloat16)([m.to(torch.bfloat16) for m in maps])
    assert out.dtype == torch.float32
    assert ((out - ref).norm() / ref.norm()).item() < 2e-2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eager_and_functional_decoding_give_the_same_bits(dtype) -> None:
    """The in-place decoding (eager, no autograd) and the plain-operation one (graph capture, autograd) agree
    exactly, also for maps of a lower precision; with autograd the decoded boxes carry gradients."""
    head = head_with_strides().eval().to(dtype)
    maps = [torch.randn(2, 8, 4, 6, dtype=dtype), torch.randn(2, 16, 2, 3, dtype=dtype)]
    with torch.no_grad():
        raw = head.raw_maps(maps)
        eager = head.decode(raw)
    functional = head._decode_functional(raw)
    assert eager.dtype == functional.dtype == torch.float32 and eager.shape == (2, 2 * (24 + 6), 8)
    assert torch.equal(eager, functional)
    assert eager[..., 4:].min() > 0 and eager[..., 2:4].min() > 0  # sigmoid scores, positive sizes: not zeros
    leaf = [m.detach().requires_grad_(True) for m in maps]
    decoded = head(leaf)  # gradient needed: the functional form
    decoded[..., :4].sum().backward()
    assert torch.equal(decoded.detach(), eager) and leaf[0].grad.abs().sum() > 0


def test_bias_priors_with_class_frequency() -> None:
    head = head_with_strides()
    for conv in head.output_convs():
        torch.nn.init.zeros_(conv.bias)
    frequency = torch.tensor([1.0, 3.0, 4.0])
    head.initialize_biases(frequency)
    bias = head.m[0].bias.detach().view(2, 8)
    torch.testing.assert_close(bias[:, 4], torch.full((2,), math.log(8 / 80**2)))
    torch.testing.assert_close(bias[0, 5:], torch.log(frequency / 8))

"""Original state dicts -> ours: q/k/v folding is exact in function, and mismatches fail with clear lists."""

from __future__ import annotations

import pytest
import torch
from tests.helpers import benchmark_script
from torch import nn

from tphyolo.models import DetectionModel, convert_original_state_dict
from tphyolo.models.attention import TransformerLayer

OriginalTransformerLayer = benchmark_script("original_attention").OriginalTransformerLayer  # the original layout

TINY = {
    "nc": 2,
    "depth_multiple": 1.0,
    "width_multiple": 0.25,
    "anchors": [[4, 6, 8, 14], [16, 30, 30, 22]],
    "backbone": [
        [-1, 1, "Conv", [64, 6, 2, 2]],
        [-1, 1, "Conv", [128, 3, 2]],
        [-1, 1, "Conv", [256, 3, 2]],
        [-1, 2, "C3TR", [256]],
    ],
    "head": [[[2, 3], 1, "Detect", ["nc", "anchors"]]],
}


def randomized(module: nn.Module, seed: int) -> nn.Module:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    return module


def test_folded_attention_equals_original_layer() -> None:
    c, heads = 32, 4
    original = randomized(OriginalTransformerLayer(c, heads), seed=1).eval()
    state = {f"tr.0.{k}": v for k, v in original.state_dict().items()}
    TransformerLayer.from_original_state(state, "tr.0.")
    ours = TransformerLayer(c, heads).eval()
    ours.load_state_dict({k.removeprefix("tr.0."): v for k, v in state.items()})
    x = torch.randn(3, 10, c)  # (B, L, C)
    with torch.no_grad():
        expected = original(x.transpose(0, 1)).transpose(0, 1)
        got = ours(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def original_state_of(model: DetectionModel) -> dict[str, torch.Tensor]:
    """`model`'s weights written in the original layout (unfolded q/k/v with an identity input projection)."""
    state = {}
    for key, value in model.state_dict().items():
        if key.endswith("qkv.weight"):
            prefix = key.removesuffix("qkv.weight")
            c = value.shape[1]
            state[prefix + "q.weight"], state[prefix + "k.weight"], state[prefix + "v.weight"] = value.split(c)
            state[prefix + "ma.in_proj_weight"] = torch.eye(c).repeat(3, 1)
        elif key.endswith("qkv.bias"):
            state[key.removesuffix("qkv.bias") + "ma.in_proj_bias"] = value
        elif ".out_proj." in key:
            state[key.replace(".out_proj.", ".ma.out_proj.")] = value
        else:
            state[key] = value
    return state


def test_round_trip_through_original_layout() -> None:
    torch.manual_seed(0)
    model = DetectionModel(TINY)
    converted = convert_original_state_dict(original_state_of(model), model)
    assert list(converted) == list(model.state_dict())
    for key, value in model.state_dict().items():
        torch.testing.assert_close(converted[key], value, rtol=1e-6, atol=1e-6, msg=key)
    assert "model.3.m.tr.1.qkv.weight" in converted and "model.3.m.tr.1.q.weight" not in converted


def test_derived_buffers_are_dropped() -> None:
    model = DetectionModel(TINY)
    state = original_state_of(model)
    state["model.3.m.tr.0.attn_mask"] = torch.zeros(4, 4)
    state["model.3.m.relative_position_index"] = torch.zeros(4, 4, dtype=torch.long)
    assert set(convert_original_state_dict(state, model)) == set(model.state_dict())


def test_missing_unexpected_and_shape_mismatches_are_listed() -> None:
    model = DetectionModel(TINY)
    state = original_state_of(model)
    del state["model.1.bn.running_var"]
    state["model.9.conv.weight"] = torch.zeros(1)
    state["model.0.conv.weight"] = torch.zeros(16, 3, 3, 3)
    with pytest.raises(ValueError) as info:
        convert_original_state_dict(state, model)
    message = str(info.value)
    assert "missing (1): ['model.1.bn.running_var']" in message
    assert "unexpected (1): ['model.9.conv.weight']" in message
    assert "model.0.conv.weight: original (16, 3, 3, 3) vs model (16, 3, 6, 6)" in message


def test_partial_attention_keys_are_reported() -> None:
    model = DetectionModel(TINY)
    state = original_state_of(model)
    del state["model.3.m.tr.0.k.weight"]
    with pytest.raises(ValueError, match=r"missing \(4\): \[.model.3.m.tr.0.qkv.weight.*unexpected \(6\)"):
        convert_original_state_dict(state, model)

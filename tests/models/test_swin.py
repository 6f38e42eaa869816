"""Swin window attention: a per-window reference, the shift masks, caching, precision, stochastic depth."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tphyolo.models.swin import (
    C3STR,
    MASKED,
    DropPath,
    SwinLayer,
    SwinStack,
    build_shift_mask,
    shift_regions,
)

M, S = 8, 4  # window, shift


def released_regions(hp: int, wp: int) -> torch.Tensor:
    """The released region map, built as the released layer builds it: on the transposed (x-major) grid,
    first-axis bands (0, -M) [a pair of indices, not a range], -M:-S, -S:; second-axis bands 0:-M, -M:-S, -S:.
    Returned in (y, x) layout."""
    grid = torch.zeros(wp, hp)  # (x, y)
    first = ((0, -M), slice(-M, -S), slice(-S, None))
    second = (slice(0, -M), slice(-M, -S), slice(-S, None))
    label = 0
    for a in first:
        for b in second:
            grid[list(a) if isinstance(a, tuple) else a, b] = label
            label += 1
    return grid.t()


def band(i: int, size: int) -> int:
    return 0 if i < size - M else 1 if i < size - S else 2


def reference_layer(layer: SwinLayer, x: torch.Tensor, regions: torch.Tensor | None) -> torch.Tensor:
    """Window attention one window at a time, bias read by explicit (dy, dx) offsets; x (B, H, W, C)."""
    n, h, w, c = x.shape
    attn, nh = layer.attn, layer.attn.num_heads
    y = layer.norm1(x)
    hp, wp = math.ceil(h / M) * M, math.ceil(w / M) * M
    y = F.pad(y, (0, 0, 0, wp - w, 0, hp - h))
    if layer.shift:
        y = torch.roll(y, (-layer.shift, -layer.shift), (1, 2))
    out = torch.zeros_like(y)
    offsets = [(ty, tx) for ty in range(M) for tx in range(M)]
    bias = torch.empty(nh, M * M, M * M)
    for i, (yi, xi) in enumerate(offsets):
        for j, (yj, xj) in enumerate(offsets):
            bias[:, i, j] = attn.relative_position_bias_table[(xi - xj + M - 1) * (2 * M - 1) + yi - yj + M - 1]
    for y0 in range(0, hp, M):
        for x0 in range(0, wp, M):
            tokens = y[:, y0 : y0 + M, x0 : x0 + M].reshape(n, M * M, c)
            q, k, v = attn.qkv(tokens).view(n, M * M, 3, nh, c // nh).permute(2, 0, 3, 1, 4)
            logits = q @ k.transpose(-1, -2) / math.sqrt(c // nh) + bias  # (B, nH, N, N)
            if regions is not None:
                r = regions[y0 : y0 + M, x0 : x0 + M].reshape(-1)
                logits = logits + MASKED * (r[:, None] != r[None, :])
            o = (logits.softmax(-1) @ v).transpose(1, 2).reshape(n, M, M, c)
            out[:, y0 : y0 + M, x0 : x0 + M] = attn.proj(o)
    if layer.shift:
        out = torch.roll(out, (layer.shift, layer.shift), (1, 2))
    x = x + out[:, :h, :w]
    return x + layer.mlp(layer.norm2(x))


def random_layer(shift: int, shift_mask: str = "original") -> SwinLayer:
    layer = SwinLayer(64, 2, window=M, shift=shift, shift_mask=shift_mask).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.3)
    return layer


def test_released_region_map_pinned() -> None:
    # The released construction, written out for a 16 x 24 padded map: columns 1..15 lose their row bands.
    regions = released_regions(16, 24)
    rows = torch.tensor([0] * 8 + [1] * 4 + [2] * 4)
    assert torch.equal(regions[:, 0], rows.float())
    assert torch.equal(regions[:, 1:16], torch.zeros(16, 15))
    assert torch.equal(regions[:, 16:20], (rows + 3).float()[:, None].expand(16, 4))
    assert torch.equal(regions[:, 20:], (rows + 6).float()[:, None].expand(16, 4))


@pytest.mark.parametrize(("hp", "wp"), [(8, 8), (8, 16), (16, 24), (24, 40), (40, 16)])
def test_shift_regions_match_released_and_standard_construction(hp: int, wp: int) -> None:
    original = shift_regions(hp, wp, M, S, "original", torch.device("cpu"))
    assert torch.equal(original.float(), released_regions(hp, wp))
    standard = shift_regions(hp, wp, M, S, "standard", torch.device("cpu"))
    expected = torch.tensor([[band(y, hp) + 3 * band(x, wp) for x in range(wp)] for y in range(hp)])
    assert torch.equal(standard, expected)


@pytest.mark.parametrize(("hp", "wp"), [(8, 8), (8, 16), (16, 24), (24, 40), (40, 16)])
def test_standard_mask_differs_only_in_bottom_row_windows_left_of_the_last(hp: int, wp: int) -> None:
    cpu = torch.device("cpu")
    original = build_shift_mask(hp, wp, M, S, "original", torch.float32, cpu)[:, 0]  # (nW, N, N)
    standard = build_shift_mask(hp, wp, M, S, "standard", torch.float32, cpu)[:, 0]
    differs = (original != standard).flatten(1).any(1).view(hp // M, wp // M)
    expected = torch.zeros_like(differs)
    expected[-1, :-1] = True
    assert torch.equal(differs, expected)
    assert set(original.unique().tolist()) <= {0.0, MASKED}


@pytest.mark.parametrize("shift_mask", ["original", "standard"])
@pytest.mark.parametrize(("h", "w"), [(8, 16), (7, 9), (13, 20), (17, 11)])
def test_layer_matches_per_window_reference(h: int, w: int, shift_mask: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, h, w, 64)
    for shift in (0, S):
        layer = random_layer(shift, shift_mask)
        hp, wp = math.ceil(h / M) * M, math.ceil(w / M) * M
        if shift_mask == "original":
            regions = released_regions(hp, wp)
        else:
            regions = shift_regions(hp, wp, M, S, "standard", torch.device("cpu"))
        with torch.no_grad():
            ours, ref = layer(x), reference_layer(layer, x, regions if shift else None)
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)


def test_layer_gradients_match_per_window_reference() -> None:
    torch.manual_seed(0)
    x, upstream = torch.randn(2, 13, 20, 64), torch.randn(2, 13, 20, 64)
    layer = random_layer(S)
    (layer(x) * upstream).sum().backward()
    ours = {name: p.grad.clone() for name, p in layer.named_parameters()}
    layer.zero_grad()
    (reference_layer(layer, x, released_regions(16, 24)) * upstream).sum().backward()
    for name, p in layer.named_parameters():
        torch.testing.assert_close(ours[name], p.grad, rtol=1e-4, atol=1e-4, msg=name)


def test_shift_mask_is_cached_per_size_and_dtype() -> None:
    layer = random_layer(S)
    x = torch.randn(1, 12, 20, 64)
    with torch.no_grad():
        layer(x)
        first = layer.mask_for(16, 24, torch.float32, x.device)
        layer(x)
        assert layer.mask_for(16, 24, torch.float32, x.device) is first  # not rebuilt per call
        assert len(layer._masks) == 1
        layer(torch.randn(1, 9, 9, 64))  # another padded size
        assert len(layer._masks) == 2
        layer.to(torch.bfloat16)(x.bfloat16())
    assert [key[2] for key in layer._masks] == [torch.bfloat16]  # moving the layer clears the cache
    assert not any(name.endswith("relative_position_index") for name in layer.state_dict())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_forward(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    block = C3STR(64, 64, n=2).eval()
    x = torch.randn(1, 64, 12, 20)
    with torch.no_grad():
        ref = block(x)
        with torch.autocast("cpu", dtype=dtype):
            out = block(x)
    assert out.dtype == dtype
    assert [key[2] for key in block.m.tr[1]._masks] == [torch.float32, dtype]  # cached in attention dtype
    assert ((out.float() - ref).norm() / ref.norm()).item() < 0.05


def test_state_dict_keys_follow_released_layout() -> None:
    block = C3STR(64, 128, n=2)  # 64 hidden channels: 2 heads
    layer_keys = [
        "norm1.weight",
        "norm1.bias",
        "attn.relative_position_bias_table",
        "attn.qkv.weight",
        "attn.proj.weight",
        "attn.proj.bias",
        "norm2.weight",
        "norm2.bias",
        "mlp.fc1.weight",
        "mlp.fc1.bias",
        "mlp.fc2.weight",
        "mlp.fc2.bias",
    ]
    swin_keys = [k for k in block.state_dict() if k.startswith("m.")]
    assert swin_keys == [f"m.tr.{i}.{k}" for i in range(2) for k in layer_keys]
    assert block.m.tr[0].attn.relative_position_bias_table.shape == (225, 2)
    assert [layer.shift for layer in block.m.tr] == [0, 4]


def test_c3str_rejects_too_few_channels() -> None:
    with pytest.raises(ValueError, match="no attention head"):
        C3STR(32, 32)


def test_drop_path_in_training_only() -> None:
    torch.manual_seed(0)
    drop = DropPath(0.5)
    x = torch.ones(2000, 3, 2)
    y = drop(x)
    assert set(y.unique().tolist()) == {0.0, 2.0}
    assert torch.equal(y, y[:, :1, :1].expand_as(y))  # one decision per sample
    assert 0.45 < (y[:, 0, 0] == 0).float().mean().item() < 0.55
    assert torch.equal(drop.eval()(x), x)


def test_many_heads_turn_on_stochastic_depth() -> None:
    assert all(layer.drop_path.p == 0.0 for layer in SwinStack(320, 10, 2).tr)
    assert all(layer.drop_path.p == 0.1 for layer in SwinStack(352, 11, 2).tr)


@pytest.mark.slow
def test_no_graph_breaks() -> None:
    layer = random_layer(S)
    explanation = torch._dynamo.explain(layer)(torch.randn(1, 12, 20, 64))
    assert explanation.graph_break_count == 0

"""Reference versions of the attention blocks that compute the way the original TPH-YOLOv5 code computes them.

They exist only to be measured against (benchmarks/attention_vs_original.py, benchmarks/model_vs_original.py,
which import this helper from beside them): same parameters, same results, the original's execution strategy.

- `OriginalC3TR`: separate bias-free q, k, v Linear maps followed by `nn.MultiheadAttention` on
  sequence-first tokens (L, B, C), called with its default `need_weights=True`, so the attention weights
  are materialised and averaged over heads on every call.
- `OriginalC3STR`: window attention with an explicit softmax over (q * scale) @ k^T + bias (+ mask); the
  shift mask is rebuilt on every call; the map is processed in the original's transposed (x-major) layout.
- `OriginalCLLABlock`: the cross-layer attention gathered with a Python loop of strided slices and
  elementwise products.

`original_from(module)` builds the reference twin of one of our blocks, loaded with equivalent weights;
`with_original_attention(model)` returns a new model tree in which every such block is replaced by its twin;
`max_relative_difference` checks that a twin computes what ours does.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.attention import C3TR, ORIGINAL_DROPOUT
from tphyolo.models.blocks import C3, Conv
from tphyolo.models.clla import CLLA, CLLABlock
from tphyolo.models.swin import C3STR, MASKED, DropPath, Mlp
from tphyolo.runtime.config import strict_fp32


class OriginalTransformerLayer(nn.Module):
    """(L, B, C) -> (L, B, C): x + drop(MHA(q(LN1 x), k(LN1 x), v(LN1 x))), then the ReLU MLP, pre-norm."""

    def __init__(self, c: int, num_heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(c)
        self.q = nn.Linear(c, c, bias=False)
        self.k = nn.Linear(c, c, bias=False)
        self.v = nn.Linear(c, c, bias=False)
        self.ma = nn.MultiheadAttention(embed_dim=c, num_heads=num_heads)
        self.ln2 = nn.LayerNorm(c)
        self.fc1 = nn.Linear(c, 4 * c, bias=False)
        self.fc2 = nn.Linear(4 * c, c, bias=False)
        self.dropout = nn.Dropout(ORIGINAL_DROPOUT)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln1(x)
        x = x + self.dropout(self.ma(self.q(y), self.k(y), self.v(y))[0])  # need_weights=True, as called there
        y = self.fc2(self.dropout(self.act(self.fc1(self.ln2(x)))))
        return x + self.dropout(y)


class OriginalTransformerBlock(nn.Module):
    """(B, C_in, H, W) -> (B, C_out, H, W) through sequence-first tokens (HW, B, C)."""

    def __init__(self, c_in: int, c_out: int, num_heads: int, num_layers: int) -> None:
        super().__init__()
        self.conv = Conv(c_in, c_out) if c_in != c_out else None
        self.linear = nn.Linear(c_out, c_out)
        self.tr = nn.Sequential(*(OriginalTransformerLayer(c_out, num_heads) for _ in range(num_layers)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.conv is not None:
            x = self.conv(x)
        n, c, h, w = x.shape
        tokens = x.flatten(2).permute(2, 0, 1)  # (HW, B, C)
        tokens = self.tr(tokens + self.linear(tokens))
        return tokens.permute(1, 2, 0).reshape(n, c, h, w)


class OriginalC3TR(C3):
    """C3 with an `OriginalTransformerBlock` (4 heads, `n` layers) as its inner block."""

    def __init__(self, c_in: int, c_out: int, n: int = 1, shortcut: bool = True, g: int = 1, e: float = 0.5) -> None:
        super().__init__(c_in, c_out, n, shortcut, g, e)
        c_hidden = int(c_out * e)
        self.m = OriginalTransformerBlock(c_hidden, c_hidden, num_heads=4, num_layers=n)


def _relative_index_rowmajor(window: int) -> torch.Tensor:
    """(M*M, M*M): (d_row + M - 1) * (2M - 1) + (d_col + M - 1) for tokens in row-major order of the
    layout being processed (the original processes the transposed map, so its rows are image columns)."""
    rows, cols = torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
    rows, cols = rows.flatten(), cols.flatten()
    d_row = rows[:, None] - rows[None, :] + window - 1
    d_col = cols[:, None] - cols[None, :] + window - 1
    return d_row * (2 * window - 1) + d_col


class OriginalWindowAttention(nn.Module):
    """(B*nW, N, C) windows -> same: softmax((q * hs^-0.5) @ k^T + bias [+ mask]) @ v, computed explicitly."""

    def __init__(self, c: int, window: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.scale = (c // num_heads) ** -0.5
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, num_heads))
        self.register_buffer("relative_position_index", _relative_index_rowmajor(window), persistent=False)
        self.qkv = nn.Linear(c, 3 * c, bias=False)
        self.proj = nn.Linear(c, c)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        bw, t, c = x.shape
        nh = self.num_heads
        q, k, v = self.qkv(x).reshape(bw, t, 3, nh, c // nh).permute(2, 0, 3, 1, 4).unbind(0)  # (B*nW, nH, N, hs)
        scores = (q * self.scale) @ k.transpose(-2, -1)  # (B*nW, nH, N, N)
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(t, t, nh)
        scores = scores + bias.permute(2, 0, 1).unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            scores = (scores.view(bw // nw, nw, nh, t, t) + mask[None, :, None]).view(bw, nh, t, t)
        attn = scores.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(bw, t, c))


def _windows(x: torch.Tensor, window: int) -> torch.Tensor:
    """(B, H, W, C) -> (B*nW, M, M, C)."""
    n, h, w, c = x.shape
    x = x.view(n, h // window, window, w // window, window, c)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window, window, c)


def _unwindows(x: torch.Tensor, window: int, h: int, w: int) -> torch.Tensor:
    """(B*nW, M, M, C) -> (B, H, W, C)."""
    n = x.shape[0] // ((h // window) * (w // window))
    x = x.view(n, h // window, w // window, window, window, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(n, h, w, -1)


class OriginalSwinLayer(nn.Module):
    """(B, C, H, W) -> (B, C, H, W), one (shifted-)window layer, processed on the transposed (B, W, H, C) map."""

    def __init__(self, c: int, num_heads: int, window: int, shift: int) -> None:
        super().__init__()
        self.window = window
        self.shift = shift
        self.norm1 = nn.LayerNorm(c)
        self.attn = OriginalWindowAttention(c, window, num_heads)
        self.drop_path = DropPath(0.1 if num_heads > 10 else 0.0)
        self.norm2 = nn.LayerNorm(c)
        self.mlp = Mlp(c, 4 * c)

    def shift_mask(self, rows: int, cols: int, device: torch.device) -> torch.Tensor:
        """(nW, N, N) additive mask of the padded transposed map; its first row band is the index pair
        (0, -M) rather than a range, as in the released code."""
        m, s = self.window, self.shift
        rows_p, cols_p = -(-rows // m) * m, -(-cols // m) * m
        regions = torch.zeros(1, rows_p, cols_p, 1, device=device)
        row_bands = ([0, -m], slice(-m, -s), slice(-s, None))
        col_bands = (slice(0, -m), slice(-m, -s), slice(-s, None))
        label = 0
        for rb in row_bands:
            for cb in col_bands:
                regions[:, rb, cb, :] = label
                label += 1
        ids = _windows(regions, m).view(-1, m * m)  # (nW, N)
        diff = ids.unsqueeze(1) - ids.unsqueeze(2)
        return diff.masked_fill(diff != 0, MASKED).masked_fill(diff == 0, 0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        m = self.window
        x = x.permute(0, 3, 2, 1).contiguous()  # (B, W, H, C): rows are image columns
        mask = self.shift_mask(w, h, x.device)  # built on every call, used only when shifted
        shortcut = x
        x = self.norm1(x)
        x = F.pad(x, (0, 0, 0, -h % m, 0, -w % m))
        _, rows_p, cols_p, _ = x.shape
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        y = self.attn(_windows(x, m).view(-1, m * m, c), mask if self.shift else None)
        x = _unwindows(y.view(-1, m, m, c), m, rows_p, cols_p)
        if self.shift:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        x = shortcut + self.drop_path(x[:, :w, :h, :].contiguous())
        x = x + self.drop_path(self.mlp(self.norm2(x)))
        return x.permute(0, 3, 2, 1).contiguous()  # (B, C, H, W)


class OriginalSwinBlock(nn.Module):
    """`num_layers` OriginalSwinLayers alternating shift 0 and window // 2 (released key names `tr.{i}`)."""

    def __init__(self, c: int, num_heads: int, num_layers: int, window: int = 8) -> None:
        super().__init__()
        self.tr = nn.Sequential(
            *(OriginalSwinLayer(c, num_heads, window, window // 2 if i % 2 else 0) for i in range(num_layers))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tr(x)


class OriginalC3STR(C3):
    """C3 with an `OriginalSwinBlock` (one head per 32 hidden channels, window 8) as its inner block."""

    def __init__(
        self, c_in: int, c_out: int, n: int = 1, shortcut: bool = True, g: int = 1, e: float = 0.5, window: int = 8
    ) -> None:
        super().__init__(c_in, c_out, n, shortcut, g, e)
        c_hidden = int(c_out * e)
        self.m = OriginalSwinBlock(c_hidden, c_hidden // 32, n, window)


class OriginalCLLA(CLLA):
    """`CLLA` (same parameters) computed as released: the `size x size` fine cells of each coarse cell
    gathered by a loop of strided slices, then elementwise products: x1 (B, C, H1, W1), x2 (B, C, H, W)."""

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x2.shape
        r = self.size
        pad = r // 2 - 1
        x1 = F.pad(x1, (pad, pad, pad, pad))
        cells = [x1[..., i::2, j::2][..., :h, :w].contiguous().unsqueeze(2) for i in range(r) for j in range(r)]
        cells = torch.cat(cells, 2).permute(0, 3, 4, 2, 1)  # (B, H, W, r*r, C)
        q = self.q(x2.permute(0, 2, 3, 1).contiguous().unsqueeze(3))  # (B, H, W, 1, C)
        k, v = self.k(cells), self.v(cells)
        dots = torch.sum(q * k / r, 4)  # (B, H, W, r*r)
        att = torch.softmax(dots.mean(3, keepdim=True) * 2 - dots, dim=-1)
        out = torch.sum(v * att.unsqueeze(4), 3)  # (B, H, W, C)
        return (out.permute(0, 3, 1, 2).contiguous() + x2) / 2


class OriginalCLLABlock(CLLABlock):
    """`CLLABlock` (same keys) computed as released: conv1 and conv2, the loop-gathered `OriginalCLLA`, det."""

    def __init__(self, c: int, c1: int, c2: int, c_out: int, *, size: int = 2) -> None:
        super().__init__(c, c1, c2, c_out, size=size)
        self.att = OriginalCLLA(size, c)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return self.det(self.att(self.conv1(x1), self.conv2(x2)))


def _c3_dims(block: C3) -> tuple[int, int, float]:
    c_in, c_hidden = block.cv1.conv.in_channels, block.cv1.conv.out_channels
    c_out = block.cv3.conv.out_channels
    return c_in, c_out, c_hidden / c_out


@torch.no_grad()
def original_c3tr_from(block: C3TR) -> OriginalC3TR:
    """The original-layout twin of `block`: q, k, v are identities and the attention's input projection holds
    our fused qkv weights, so both compute the same function (the twin still runs all three projections)."""
    c_in, c_out, e = _c3_dims(block)
    twin = OriginalC3TR(c_in, c_out, len(block.m.tr), e=e)
    state = {k: v for k, v in block.state_dict().items() if ".tr." not in k}
    for i, layer in enumerate(block.m.tr):
        prefix = f"m.tr.{i}."
        eye = torch.eye(layer.qkv.in_features, dtype=layer.qkv.weight.dtype, device=layer.qkv.weight.device)
        for name in ("q", "k", "v"):
            state[prefix + f"{name}.weight"] = eye
        state[prefix + "ma.in_proj_weight"] = layer.qkv.weight
        state[prefix + "ma.in_proj_bias"] = layer.qkv.bias
        for src, dst in (("out_proj", "ma.out_proj"), ("ln1", "ln1"), ("ln2", "ln2"), ("fc1", "fc1"), ("fc2", "fc2")):
            for key, value in getattr(layer, src).state_dict().items():
                state[prefix + f"{dst}.{key}"] = value
    twin.load_state_dict(state, strict=True)
    return _like(twin, block)


@torch.no_grad()
def original_c3str_from(block: C3STR) -> OriginalC3STR:
    """The original-layout twin of `block` (which must use the released shift mask), same weights."""
    layers = list(block.m.tr)
    if layers and layers[0].shift_mask != "original":
        raise InputError("original_c3str_from: only C3STR with shift_mask='original' has an original twin")
    c_in, c_out, e = _c3_dims(block)
    twin = OriginalC3STR(c_in, c_out, len(layers), e=e, window=layers[0].window if layers else 8)
    twin.load_state_dict(block.state_dict(), strict=True)
    return _like(twin, block)


@torch.no_grad()
def original_clla_block_from(block: CLLABlock) -> OriginalCLLABlock:
    """The loop-gathered twin of a `CLLABlock`, same weights."""
    twin = OriginalCLLABlock(
        block.conv1.out_channels,
        block.conv1.in_channels,
        block.conv2.in_channels,
        block.det.out_channels,
        size=block.att.size,
    )
    twin.load_state_dict(block.state_dict(), strict=True)
    return _like(twin, block)


def _like(twin: nn.Module, block: nn.Module) -> nn.Module:
    param = next(block.parameters())
    return twin.to(device=param.device, dtype=param.dtype).train(block.training)


def original_from(block: nn.Module) -> nn.Module:
    """The original-computation twin of a C3TR, C3STR or CLLABlock; TypeError for anything else."""
    makers = ((C3TR, original_c3tr_from), (C3STR, original_c3str_from), (CLLABlock, original_clla_block_from))
    for kind, make in makers:
        if isinstance(block, kind) and not isinstance(block, OriginalCLLABlock):
            return make(block)
    raise TypeError(f"no original-computation twin for {type(block).__name__}")


def with_original_attention(model: nn.Module) -> tuple[nn.Module, int]:
    """A new module tree equal to `model` except that each C3TR, C3STR and CLLABlock is replaced by its
    original-computation twin (same weights); `model` is untouched. Returns (new model, blocks replaced)."""
    twin = copy.deepcopy(model)
    replaced = 0
    for parent in list(twin.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, (C3TR, C3STR, CLLABlock)) and not isinstance(child, OriginalCLLABlock):
                setattr(parent, name, original_from(child))
                replaced += 1
    return twin, replaced


def max_relative_difference(ours: nn.Module, baseline: nn.Module, inputs: Sequence[torch.Tensor]) -> float:
    """max |ours - baseline| / max(1, max |baseline|) of the eval-mode outputs in strict fp32 (no TF32);
    the modules are left in eval mode."""
    ours.eval()
    baseline.eval()
    with torch.no_grad(), strict_fp32():
        expected = baseline(*inputs)
        got = ours(*inputs)
    return float((got - expected).abs().max() / expected.abs().max().clamp(min=1.0))

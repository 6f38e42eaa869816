"""C3STR: the C3 block with shifted-window (Swin) transformer layers in place of its bottlenecks.

Each layer attends within non-overlapping `window x window` windows (8 by default); every second layer
shifts the windows by `window // 2` (cyclic roll), and an additive mask keeps tokens that the roll brought
together from different image regions apart. Maps whose sides are not multiples of the window are
zero-padded at the bottom and right (after the first LayerNorm) and cropped back; padded tokens take part in
the attention unmasked, as in the released models.

Two conventions of the released TPH-YOLOv5 weights are kept:

- The relative-position bias table is indexed with the column (x) offset as its major axis:
  row `(dx + M - 1) * (2M - 1) + (dy + M - 1)` for a query-key offset (dy, dx) in a window of side M.
- `shift_mask="original"` (the default) rebuilds the shift mask of the released code. The Swin paper splits
  the rolled, padded map (Hp x Wp) into 3 row bands [0, Hp - M), [Hp - M, Hp - S), [Hp - S, Hp) times 3
  column bands (S = M // 2) and masks attention between different cells. The released code builds this
  map on the transposed (x-major) grid and writes the first column band as the index pair (0, -M) instead
  of the range 0:-M, so only columns 0 and Wp - M get it (the latter then overwritten by the second band).
  Result: in columns 1 <= x < Wp - M of the rolled map every token has region 0 whatever its row band.
  Only windows of the bottom window row, except the rightmost, are affected: there the rows rolled in from
  the top of the image are not masked from the rows above them, and the tokens of column 0 attend only to
  column-0 tokens of their own row band. `shift_mask="standard"` selects the paper's mask for new
  trainings (the `C3STRStandard` layer name in a model yaml); the two masks differ only in those windows.

The relative-position index and the shift masks are derived data: non-persistent buffers or caches, never
part of the state dict. The bias is gathered from its learned table on each call (it is a parameter);
the shift mask is built once per (padded size, dtype, device) and cached.

Under torch.compile the mask is built inside the graph, and one dynamic-size graph serves all map sizes
with at least two windows per side; maps with a side of one window (at most `window` cells) get graphs of
their own, because the compiler specialises sizes equal to 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tphyolo.models.blocks import C3
from tphyolo.models.swin_windows import (
    MASKED,
    SHIFT_MASKS,
    WindowPlan,
    build_shift_mask,
    masked_windows,
    merge_windows,
    partition_windows,
    relative_position_index,
    shift_regions,
    window_plan,
)

__all__ = [  # the window geometry is re-exported: it is part of this module's documented behaviour
    "C3STR",
    "MASKED",
    "SHIFT_MASKS",
    "DropPath",
    "Mlp",
    "SwinLayer",
    "SwinStack",
    "WindowAttention",
    "build_shift_mask",
    "merge_windows",
    "partition_windows",
    "relative_position_index",
    "shift_regions",
]

ShiftMask = Literal["original", "standard"]
HEAD_CHANNELS = 32  # C3STR gives its Swin layers one head per 32 channels
DROP_PATH_HEADS = 10  # layers with more heads than this use stochastic depth 0.1, as released
DROP_PATH_RATE = 0.1
MAX_CACHED_MASKS = 8  # shift masks kept per layer (one per input size, dtype and device)


class DropPath(nn.Module):
    """Stochastic depth: in training, zeroes the whole sample with probability `p` and scales survivors by
    1 / (1 - p); identity in eval mode or when p == 0. Works on any (B, ...) tensor."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        survive = torch.rand(shape, dtype=x.dtype, device=x.device).add_(keep).floor_()  # (B, 1, ...) 0 / 1
        return x.div(keep) * survive


class Mlp(nn.Module):
    """fc1 -> GELU -> dropout -> fc2 -> dropout on (..., C) tokens."""

    def __init__(self, c: int, c_hidden: int, drop: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(c, c_hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(c_hidden, c)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


def attention_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype that Linear layers produce from `x`: the autocast dtype inside autocast, else x's."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


class WindowAttention(nn.Module):
    """Multi-head self-attention within windows, with a learned relative-position bias.

    forward: x (B, nW, N, C) tokens of nW windows of N = M*M tokens; `shift_mask` (nW, 1, N, N) additive or
    None -> (B, nW, N, C). `attend` is the same computation on window-major rows without the output
    projection (what `SwinLayer` runs outside torch.compile). Parameter names match the released layer
    (qkv, proj, relative_position_bias_table).
    """

    def __init__(
        self,
        c: int,
        window: int,
        num_heads: int,
        *,
        qkv_bias: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
    ) -> None:
        super().__init__()
        if num_heads < 1 or c % num_heads:
            raise ValueError(f"WindowAttention: {c} channels do not split into {num_heads} heads")
        self.num_heads = num_heads
        self.attn_drop = attn_drop
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, num_heads))
        self.register_buffer("relative_position_index", relative_position_index(window), persistent=False)
        self.qkv = nn.Linear(c, 3 * c, bias=qkv_bias)
        self.proj = nn.Linear(c, c)
        self.proj_drop = nn.Dropout(proj_drop)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def position_bias(self) -> torch.Tensor:
        """(nH, N, N) relative-position bias, float32 (the table's dtype)."""
        n_tok = self.relative_position_index.shape[0]
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]  # (N*N, nH)
        return bias.view(n_tok, n_tok, self.num_heads).permute(2, 0, 1)

    def forward(self, x: torch.Tensor, shift_mask: torch.Tensor | None = None) -> torch.Tensor:
        n, nw, t, c = x.shape
        nh = self.num_heads
        qkv = self.qkv(x).view(n, nw, t, 3, nh, c // nh)  # (B, nW, N, 3, nH, hs)
        q, k, v = qkv.permute(3, 0, 1, 4, 2, 5).unbind(0)  # (B, nW, nH, N, hs) each
        bias = self.position_bias().to(q.dtype)  # (nH, N, N)
        if shift_mask is None:  # one bias for all windows: windows fold into the batch
            shape, attn_mask = (n * nw, nh, t, -1), bias.unsqueeze(0)  # (1, nH, N, N)
        else:  # a bias per (window, head), shared over the batch
            shift_mask = shift_mask.to(q.dtype)  # no-op when built in the attention dtype
            shape, attn_mask = (n, nw * nh, t, -1), (bias + shift_mask).reshape(1, nw * nh, t, t)
        out = F.scaled_dot_product_attention(
            q.reshape(shape),
            k.reshape(shape),
            v.reshape(shape),
            attn_mask=attn_mask,
            dropout_p=self.attn_drop if self.training else 0.0,
        )
        out = out.view(n, nw, nh, t, c // nh).transpose(2, 3).reshape(n, nw, t, c)  # (B, nW, N, C)
        return self.proj_drop(self.proj(out))

    def attend(self, rows: torch.Tensor, tokens: int, plain: int, biases: WindowBiases) -> torch.Tensor:
        """Attention of window-major rows (nW' * N, C) (windows of `tokens` tokens, the first `plain` of them
        with the bias `biases.plain`, the rest with `biases.masked`) -> (nW' * N, C), before `proj`.
        q, k and v stay views of one qkv projection; each group of windows is one attention call."""
        c = rows.shape[1]
        nh = self.num_heads
        qkv = self.qkv(rows).view(-1, tokens, 3, nh, c // nh).permute(2, 0, 3, 1, 4)  # (3, nW', nH, N, hs)
        if _needs_explicit(biases.plain):
            qkv = qkv.contiguous()  # one copy, then every product below is a batched matmul of views
        drop = self.attn_drop if self.training else 0.0
        groups = zip((plain, qkv.shape[1] - plain), (biases.plain, biases.masked), strict=True)
        sizes, group_biases = zip(*((n, b) for n, b in groups if n), strict=True)  # the non-empty groups
        groups = qkv.split(sizes, dim=1) if len(sizes) > 1 else (qkv,)  # no split (and no gradient cat) for one
        outs = []
        for group, bias in zip(groups, group_biases, strict=True):
            q, k, v = group.unbind(0)  # (nW'', nH, N, hs) each
            outs.append(_attention(q, k, v, bias, drop).transpose(1, 2))  # (nW'', N, nH, hs)
        out = outs[0] if len(outs) == 1 else torch.cat(outs)
        return out.reshape(-1, c)  # a view when the kernel wrote (nW', N, nH, hs) memory


def _needs_explicit(bias: torch.Tensor) -> bool:
    """Whether `_attention` computes explicitly: a bias that needs a gradient, on the CPU, where no fused
    SDPA kernel takes one (SDPA would take its math path, with extra copies and checks)."""
    return bias.requires_grad and bias.device.type == "cpu"


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, drop: float) -> torch.Tensor:
    """softmax(q k^T / sqrt(hs) + bias) v for q, k, v (n, nH, N, hs) and an additive bias broadcastable to
    (n, nH, N, N); SDPA unless `_needs_explicit(bias)`."""
    if not _needs_explicit(bias):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=drop)
    logits = torch.add(bias, q @ k.transpose(-2, -1), alpha=q.shape[-1] ** -0.5)  # (n, nH, N, N), one pass
    weights = F.dropout(logits.softmax(dim=-1), drop) if drop else logits.softmax(dim=-1)
    return weights @ v  # (n, nH, N, hs)


@dataclass(frozen=True)
class WindowBiases:
    """The additive attention biases of one layer call: `plain` (1, nH, N, N), the relative-position bias of
    windows without a shift mask; `masked` (nW_m * B, nH, N, N), bias plus shift mask of the masked windows
    of a `WindowPlan`, repeated per image, or None when there are none."""

    plain: torch.Tensor
    masked: torch.Tensor | None


class SwinLayer(nn.Module):
    """One (shifted-)window transformer layer on channel-last maps (B, H, W, C) -> (B, H, W, C):
    x + drop_path(W-MSA(LN1(x))), then x + drop_path(MLP(LN2(x))) with a 4C hidden MLP.

    `shift` 0 gives regular windows; `shift` > 0 rolls the map by -shift before partitioning and masks
    across the seams according to `shift_mask` ("original" or "standard", see the module docstring).
    """

    def __init__(
        self,
        c: int,
        num_heads: int,
        *,
        window: int = 8,
        shift: int = 0,
        shift_mask: ShiftMask = "original",
        mlp_ratio: float = 4.0,
        qkv_bias: bool = False,
        drop: float = 0.0,
        attn_drop: float = 0.0,
        drop_path: float = 0.0,
    ) -> None:
        super().__init__()
        if not 0 <= shift < window:
            raise ValueError(f"SwinLayer: shift must be in [0, {window}), got {shift}")
        if shift_mask not in SHIFT_MASKS:
            raise ValueError(f"shift_mask must be one of {SHIFT_MASKS}, got {shift_mask!r}")
        self.window = window
        self.shift = shift
        self.shift_mask = shift_mask
        self.norm1 = nn.LayerNorm(c)
        self.attn = WindowAttention(c, window, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=drop)
        self.drop_path = DropPath(drop_path)
        self.norm2 = nn.LayerNorm(c)
        self.mlp = Mlp(c, int(c * mlp_ratio), drop)
        self._masks: dict[tuple[int, int, torch.dtype, torch.device], torch.Tensor] = {}
        self._plans: dict[tuple[int, int, int, torch.device], WindowPlan] = {}
        self._biases: dict[tuple, tuple[tuple[int, int], WindowBiases]] = {}

    def mask_for(self, hp: int, wp: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """The (nW, 1, N, N) shift mask of a padded Hp x Wp map, built once per (size, dtype, device).
        Under torch.compile it is built inside the graph instead (constant for fixed sizes)."""
        args = (hp, wp, self.window, self.shift, self.shift_mask, dtype, device)
        if torch.compiler.is_compiling():
            return build_shift_mask(*args)
        return _cached(self._masks, (hp, wp, dtype, device), lambda: build_shift_mask(*args))

    def plan_for(self, batch: int, h: int, w: int, device: torch.device) -> WindowPlan:
        """The `WindowPlan` of (batch, h, w) maps for this layer's windows and shift, built once per size."""

        def build() -> WindowPlan:
            m = self.window
            hp, wp = -(-h // m) * m, -(-w // m) * m
            masked = masked_windows(hp, wp, m, self.shift, self.shift_mask, device)
            return window_plan(batch, h, w, m, self.shift, masked, device)

        return _cached(self._plans, (batch, h, w, device), build)

    def biases_for(self, plan: WindowPlan, batch: int, dtype: torch.dtype, device: torch.device) -> WindowBiases:
        """The attention biases of a call on `plan`, in `dtype`. Gathered from the bias table on every call
        while the table needs a gradient; otherwise built once and reused until the table changes (an
        optimiser step, `load_state_dict` or an EMA update bumps its version)."""
        table = self.attn.relative_position_bias_table
        if torch.is_grad_enabled() and table.requires_grad:
            return self._build_biases(plan, batch, dtype, device)
        stamp = (table.data_ptr(), table._version)
        key = (plan.hp, plan.wp, batch, dtype, device)
        entry = self._biases.get(key)
        if entry is None or entry[0] != stamp:
            self._biases.pop(key, None)
            entry = _cached(self._biases, key, lambda: (stamp, self._build_biases(plan, batch, dtype, device)))
        return entry[1]

    def _build_biases(self, plan: WindowPlan, batch: int, dtype: torch.dtype, device: torch.device) -> WindowBiases:
        bias = self.attn.position_bias().to(dtype)  # (nH, N, N)
        masked = None
        if plan.plain < plan.num_windows:
            mask = self.mask_for(plan.hp, plan.wp, dtype, device)[plan.windows[plan.plain :]]  # (nW_m, 1, N, N)
            masked = (bias + mask).unsqueeze(1)  # (nW_m, 1, nH, N, N)
            masked = masked.expand(-1, batch, -1, -1, -1).reshape(-1, *bias.shape)  # (nW_m * B, nH, N, N)
        return WindowBiases(bias.unsqueeze(0).contiguous(), masked)

    def _apply(self, fn, recurse=True):  # noqa: ANN001 - nn.Module signature
        self._masks, self._plans, self._biases = {}, {}, {}  # cached tensors belong to the old device/dtype
        return super()._apply(fn, recurse)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return self._forward_traced(x)
        n, h, w, c = x.shape
        plan = self.plan_for(n, h, w, x.device)
        y = self.norm1(x)
        if (plan.hp, plan.wp) != (h, w):
            y = F.pad(y, (0, 0, 0, plan.wp - w, 0, plan.hp - h))  # (B, Hp, Wp, C), zeros after the norm
        rows = y.reshape(-1, c).index_select(0, plan.gather)  # (nW * B * N, C) rolled windows, window-major
        biases = self.biases_for(plan, n, attention_dtype(y), x.device)
        m2 = self.window * self.window
        y = self.attn.attend(rows, m2, plan.plain * n, biases)  # (nW * B * N, C)
        y = self.attn.proj(y.index_select(0, plan.scatter))  # (B * H * W, C) unrolled, padding dropped
        x = x + self.drop_path(self.attn.proj_drop(y).view(n, h, w, c))
        return x + self.drop_path(self.mlp(self.norm2(x)))  # (B, H, W, C)

    def _forward_traced(self, x: torch.Tensor) -> torch.Tensor:
        """`forward` as torch.compile traces it: pad, roll and partition as tensor ops, which the compiler
        fuses; one attention call over all windows with the shift mask built in the graph."""
        n, h, w, c = x.shape
        m = self.window
        y = self.norm1(x)
        pad_h, pad_w = -h % m, -w % m
        y = F.pad(y, (0, 0, 0, pad_w, 0, pad_h))  # (B, Hp, Wp, C), zeros after the norm
        hp, wp = h + pad_h, w + pad_w
        mask = None
        if self.shift:
            y = torch.roll(y, shifts=(-self.shift, -self.shift), dims=(1, 2))
            mask = self.mask_for(hp, wp, attention_dtype(y), y.device)
        y = self.attn(partition_windows(y, m), mask)  # (B, nW, M*M, C)
        y = merge_windows(y, m, hp, wp)  # (B, Hp, Wp, C)
        if self.shift:
            y = torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))
        x = x + self.drop_path(y[:, :h, :w])
        return x + self.drop_path(self.mlp(self.norm2(x)))  # (B, H, W, C)


def _cached(cache: dict, key: object, build: Callable[[], object]):  # noqa: ANN202 - returns the cached value
    """cache[key], built by `build()` when missing; the oldest entry is dropped beyond MAX_CACHED_MASKS."""
    value = cache.get(key)
    if value is None:
        if len(cache) >= MAX_CACHED_MASKS:
            cache.pop(next(iter(cache)))
        value = cache[key] = build()
    return value


class SwinStack(nn.Module):
    """`num_layers` Swin layers on (B, C, H, W) maps, alternating regular and shifted (by window // 2)
    windows; the layers live in `tr` (released key names `tr.{i}.…`). Heads: `num_heads`; more than 10
    heads turn on stochastic depth 0.1 in every layer, as released."""

    def __init__(
        self, c: int, num_heads: int, num_layers: int, *, window: int = 8, shift_mask: ShiftMask = "original"
    ) -> None:
        super().__init__()
        drop_path = DROP_PATH_RATE if num_heads > DROP_PATH_HEADS else 0.0
        self.tr = nn.Sequential(
            *(
                SwinLayer(
                    c,
                    num_heads,
                    window=window,
                    shift=window // 2 if i % 2 else 0,
                    shift_mask=shift_mask,
                    drop_path=drop_path,
                )
                for i in range(num_layers)
            )
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.tr(x.permute(0, 2, 3, 1).contiguous())  # (B, H, W, C), contiguous for the layers' views
        if torch.compiler.is_compiling():
            return y.permute(0, 3, 1, 2)
        return _ChannelsFirst.apply(y)  # (B, C, H, W), channels-last memory


class _ChannelsFirst(torch.autograd.Function):
    """(B, H, W, C) -> its (B, C, H, W) view, whose gradient goes back as a contiguous (B, H, W, C) tensor:
    one copy, where a plain permute would hand every layer a strided gradient for each matmul to copy."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # noqa: ANN001 - autograd.Function signature
        return x.permute(0, 3, 1, 2)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        return grad.permute(0, 2, 3, 1).contiguous()


class C3STR(C3):
    """C3 whose inner blocks are `n` Swin layers (window 8, one head per 32 hidden channels):
    (B, C_in, H, W) -> (B, C_out, H, W), any H and W.

    `shift_mask`: "original" reproduces the released models (their shift-mask quirk, see the module
    docstring); "standard" uses the Swin paper's mask, for new trainings.
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        n: int = 1,
        shortcut: bool = True,
        g: int = 1,
        e: float = 0.5,
        *,
        window: int = 8,
        shift_mask: ShiftMask = "original",
    ) -> None:
        super().__init__(c_in, c_out, n, shortcut, g, e)
        c_hidden = int(c_out * e)
        if c_hidden < HEAD_CHANNELS:
            raise ValueError(
                f"C3STR: {c_hidden} hidden channels give no attention head (one per {HEAD_CHANNELS} channels)"
            )
        self.m = SwinStack(c_hidden, c_hidden // HEAD_CHANNELS, n, window=window, shift_mask=shift_mask)

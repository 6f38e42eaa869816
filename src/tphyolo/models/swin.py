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

How a layer computes (eager): the first LayerNorm, zero padding only when a side is not a multiple of the
window, then one indexed gather (`WindowPlan`, built once per map size) that rolls and partitions the map
into window-major rows; attention (`WindowAttention.attend`); one gather back that unrolls, merges and drops
the padding, so the output projection runs on real tokens only. The relative-position index, the shift
masks and the plans are derived data: non-persistent buffers or caches, never part of the state dict. The
additive biases (relative-position bias, plus the shift mask for the windows that need one) are gathered
from the learned table on each call while it needs a gradient, and otherwise cached per (padded size, batch,
dtype, device) and rebuilt when the table changes in place (optimiser steps, EMA updates, `load_state_dict`).

Under torch.compile the layer runs the plain formulation (pad, roll, partition, one attention call, merge,
roll back, crop), which the compiler fuses; the mask is built inside the graph, and one dynamic-size graph
serves all map sizes with at least two windows per side; maps with a side of one window (at most `window`
cells) get graphs of their own, because the compiler specialises sizes equal to 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.blocks import C3
from tphyolo.models.capture import capturing
from tphyolo.models.swin_attention import WindowAttention, WindowBiases, attention_dtype
from tphyolo.models.swin_windows import (
    MASKED,
    SHIFT_MASKS,
    WindowPlan,
    build_shift_mask,
    masked_windows,
    merge_windows,
    move_rows,
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
MAX_CACHED = 8  # entries kept in each cache of a layer (masks, plans, biases): sizes x dtypes x devices


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
            raise InputError(f"SwinLayer: shift must be in [0, {window}), got {shift}")
        if shift_mask not in SHIFT_MASKS:
            raise InputError(f"shift_mask must be one of {SHIFT_MASKS}, got {shift_mask!r}")
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
        Under graph capture (torch.compile, export tracing) it is built inside the graph instead."""
        args = (hp, wp, self.window, self.shift, self.shift_mask, dtype, device)
        if capturing():
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
        stamp = (table.data_ptr(), table._version)  # in-place updates bump the version
        key = (plan.hp, plan.wp, batch, dtype, device)
        if key in self._biases and self._biases[key][0] != stamp:
            del self._biases[key]  # built from an older table
        return _cached(self._biases, key, lambda: (stamp, self._build_biases(plan, batch, dtype, device)))[1]

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
        if capturing():
            return self._forward_traced(x)
        n, h, w, c = x.shape
        plan = self.plan_for(n, h, w, x.device)
        y = self.norm1(x)
        if (plan.hp, plan.wp) != (h, w):
            y = F.pad(y, (0, 0, 0, plan.wp - w, 0, plan.hp - h))  # (B, Hp, Wp, C), zeros after the norm
        rows = move_rows(y.reshape(-1, c), plan.gather, plan.gather_back, plan.padding[:0])  # (nW * B * N, C)
        biases = self.biases_for(plan, n, attention_dtype(y), x.device)
        y = self.attn.attend(rows, self.window * self.window, plan.plain * n, biases)  # (nW * B * N, C)
        y = move_rows(y, plan.scatter, plan.scatter_back, plan.padding)  # (B * H * W, C), padding dropped
        x = self._add_branch(x, self.attn.proj_drop(self.attn.proj(y)).view(n, h, w, c))
        return self._add_branch(x, self._mlp(self.norm2(x)))  # (B, H, W, C)

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        """`self.mlp(x)`; without autograd its GELU runs in place (on the CPU a fresh tensor above glibc's
        32 MiB mmap threshold is page-faulted in on every call, and the hidden activations are 4C wide)."""
        if torch.is_grad_enabled():
            return self.mlp(x)
        hidden = torch.ops.aten.gelu_(self.mlp.fc1(x), approximate=self.mlp.act.approximate)
        return self.mlp.drop2(self.mlp.fc2(self.mlp.drop1(hidden)))

    def _add_branch(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        """x + drop_path(branch); without autograd, added into `branch` (a fresh tensor of x's shape) when
        the sum keeps its dtype."""
        branch = self.drop_path(branch)
        if torch.is_grad_enabled() or torch.promote_types(x.dtype, branch.dtype) != branch.dtype:
            return x + branch
        return branch.add_(x)

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
    """cache[key], built by `build()` when missing (the oldest entry is dropped beyond MAX_CACHED); built as
    ordinary tensors without autograd history even under inference mode, so that training can use them."""
    value = cache.get(key)
    if value is None:
        if len(cache) >= MAX_CACHED:
            cache.pop(next(iter(cache)))
        with torch.inference_mode(False), torch.no_grad():
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
        if capturing():
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
            raise InputError(
                f"C3STR: {c_hidden} hidden channels give no attention head (one per {HEAD_CHANNELS} channels)"
            )
        self.m = SwinStack(c_hidden, c_hidden // HEAD_CHANNELS, n, window=window, shift_mask=shift_mask)

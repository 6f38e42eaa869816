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

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tphyolo.models.blocks import C3

ShiftMask = Literal["original", "standard"]
SHIFT_MASKS: tuple[str, ...] = ("original", "standard")
MASKED = -100.0  # additive attention logit between tokens of different regions
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


def relative_position_index(window: int) -> torch.Tensor:
    """(M*M, M*M) long: row of the bias table for each (query, key) token pair of a window of side M, tokens
    in row-major (y, x) order; the table's major axis is the x offset (released layout)."""
    ys, xs = torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
    ys, xs = ys.flatten(), xs.flatten()  # (M*M,)
    dy = ys[:, None] - ys[None, :] + window - 1  # (M*M, M*M) in [0, 2M - 2]
    dx = xs[:, None] - xs[None, :] + window - 1
    return dx * (2 * window - 1) + dy


def _bands(size: int, window: int, shift: int, device: torch.device) -> torch.Tensor:
    """(size,) long: 0 for [0, size - window), 1 for [size - window, size - shift), 2 for the last `shift`."""
    i = torch.arange(size, device=device)
    return (i >= size - window).long() + (i >= size - shift).long()


def shift_regions(hp: int, wp: int, window: int, shift: int, mode: str, device: torch.device) -> torch.Tensor:
    """(Hp, Wp) long region ids of the rolled, padded map; tokens may attend only within their region.
    `mode` "standard" is the Swin paper's 3 x 3 bands; "original" is the released map (module docstring)."""
    rows = _bands(hp, window, shift, device)  # (Hp,)
    cols = _bands(wp, window, shift, device)  # (Wp,)
    regions = rows[:, None] + 3 * cols[None, :]  # (Hp, Wp)
    if mode == "original":
        x = torch.arange(wp, device=device)
        collapsed = (x >= 1) & (x < wp - window)  # (Wp,) columns whose row bands were never written
        regions = regions.masked_fill(collapsed[None, :], 0)
    elif mode != "standard":
        raise ValueError(f"shift_mask must be one of {SHIFT_MASKS}, got {mode!r}")
    return regions


def partition_windows(x: torch.Tensor, window: int) -> torch.Tensor:
    """(B, Hp, Wp, C) -> (B, nW, M*M, C); windows row-major, tokens row-major within a window."""
    n, hp, wp, c = x.shape
    x = x.view(n, hp // window, window, wp // window, window, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(n, -1, window * window, c)


def merge_windows(x: torch.Tensor, window: int, hp: int, wp: int) -> torch.Tensor:
    """Inverse of `partition_windows`: (B, nW, M*M, C) -> (B, Hp, Wp, C)."""
    n, _, _, c = x.shape
    x = x.view(n, hp // window, wp // window, window, window, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(n, hp, wp, c)


def build_shift_mask(
    hp: int, wp: int, window: int, shift: int, mode: str, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """(nW, 1, M*M, M*M) additive mask: 0 within a region, MASKED across regions."""
    regions = shift_regions(hp, wp, window, shift, mode, device)[None, :, :, None]  # (1, Hp, Wp, 1)
    regions = partition_windows(regions, window)[0, :, :, 0]  # (nW, M*M)
    different = regions[:, :, None] != regions[:, None, :]  # (nW, M*M, M*M)
    mask = torch.zeros(different.shape, dtype=dtype, device=device).masked_fill_(different, MASKED)
    return mask.unsqueeze(1)


def attention_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype that Linear layers produce from `x`: the autocast dtype inside autocast, else x's."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


class WindowAttention(nn.Module):
    """Multi-head self-attention within windows, with a learned relative-position bias.

    forward: x (B, nW, N, C) tokens of nW windows of N = M*M tokens; `shift_mask` (nW, 1, N, N) additive or
    None -> (B, nW, N, C). Parameter names match the released layer (qkv, proj, relative_position_bias_table).
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

    def mask_for(self, hp: int, wp: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """The (nW, 1, N, N) shift mask of a padded Hp x Wp map, built once per (size, dtype, device).
        Under torch.compile it is built inside the graph instead (constant for fixed sizes)."""
        args = (hp, wp, self.window, self.shift, self.shift_mask, dtype, device)
        if torch.compiler.is_compiling():
            return build_shift_mask(*args)
        key = (hp, wp, dtype, device)
        mask = self._masks.get(key)
        if mask is None:
            if len(self._masks) >= MAX_CACHED_MASKS:
                self._masks.pop(next(iter(self._masks)))  # drop the oldest size
            mask = self._masks[key] = build_shift_mask(*args)
        return mask

    def _apply(self, fn, recurse=True):  # noqa: ANN001 - nn.Module signature
        self._masks = {}  # cached masks belong to the old device
        return super()._apply(fn, recurse)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
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
        y = self.tr(x.permute(0, 2, 3, 1))  # (B, H, W, C)
        return y.permute(0, 3, 1, 2)  # (B, C, H, W), channels-last memory


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

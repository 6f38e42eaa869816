"""Window geometry of the Swin layers: relative-position index, shift regions and masks, window partitions,
and the gather plans that move a map into (shifted) windows and back in one indexed copy each.

Layouts: maps are channel-last (B, H, W, C); a window of side M holds N = M * M tokens in row-major order;
windows are numbered row-major on the padded, rolled map (Hp x Wp, sides rounded up to multiples of M).
The conventions of the released weights (x-major bias table, the "original" shift mask) are described in
`tphyolo.models.swin`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tphyolo.errors import InputError

SHIFT_MASKS: tuple[str, ...] = ("original", "standard")
MASKED = -100.0  # additive attention logit between tokens of different regions


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
    `mode` "standard" is the Swin paper's 3 x 3 bands; "original" is the released map (see `swin`)."""
    rows = _bands(hp, window, shift, device)  # (Hp,)
    cols = _bands(wp, window, shift, device)  # (Wp,)
    regions = rows[:, None] + 3 * cols[None, :]  # (Hp, Wp)
    if mode == "original":
        x = torch.arange(wp, device=device)
        collapsed = (x >= 1) & (x < wp - window)  # (Wp,) columns whose row bands were never written
        regions = regions.masked_fill(collapsed[None, :], 0)
    elif mode != "standard":
        raise InputError(f"shift_mask must be one of {SHIFT_MASKS}, got {mode!r}")
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


def masked_windows(hp: int, wp: int, window: int, shift: int, mode: str, device: torch.device) -> torch.Tensor:
    """(nW,) bool: the windows whose shift mask is not all zero (they span several regions); none when
    `shift` is 0."""
    if shift == 0:
        return torch.zeros((hp // window) * (wp // window), dtype=torch.bool, device=device)
    regions = shift_regions(hp, wp, window, shift, mode, device)[None, :, :, None]
    regions = partition_windows(regions, window)[0, :, :, 0]  # (nW, M*M)
    return (regions != regions[:, :1]).any(dim=1)


@dataclass(frozen=True)
class WindowPlan:
    """How a batch of (B, H, W, C) maps moves into the windows of its padded (Hp x Wp), rolled map and back.

    `gather` (nW * B * N,): for each window token, in the plan's window-major order (window, image, token),
    its row in the padded maps flattened to (B * Hp * Wp, C); the cyclic shift is part of the index.
    `scatter` (B * H * W,): for each token of the unpadded maps, row-major, its row in the window-ordered
    tensor (so padded tokens are dropped on the way back). `windows` (nW,): the window numbers in plan
    order; the first `plain` of them have an all-zero shift mask, the rest (`windows[plain:]`) need it.
    `gather_back` and `scatter_back` invert the two moves (for their gradients, see `move_rows`):
    `gather_back` (B * Hp * Wp,) is the window-ordered row of each padded-map row, `scatter_back`
    (nW * B * N,) the unpadded-map row of each window-ordered row (0 for `padding`, the rows that hold
    padded tokens).
    """

    gather: torch.Tensor
    scatter: torch.Tensor
    windows: torch.Tensor
    plain: int
    hp: int
    wp: int
    gather_back: torch.Tensor
    scatter_back: torch.Tensor
    padding: torch.Tensor

    @property
    def num_windows(self) -> int:
        return self.windows.numel()


def window_plan(
    batch: int, h: int, w: int, window: int, shift: int, masked: torch.Tensor, device: torch.device
) -> WindowPlan:
    """The `WindowPlan` of a (batch, h, w) map for windows of side `window` rolled by -`shift`; `masked` (nW,)
    marks the windows that need the shift mask (`masked_windows`); they are put last."""
    hp, wp = -(-h // window) * window, -(-w // window) * window
    cols = wp // window
    order = torch.cat([(~masked).nonzero().flatten(), masked.nonzero().flatten()]).to(device)  # (nW,)
    t = torch.arange(window, device=device)
    ty, tx = t.repeat_interleave(window), t.repeat(window)  # (N,) token offsets within a window
    ys = ((order // cols)[:, None] * window + ty + shift) % hp  # (nW, N) source rows of the rolled windows
    xs = ((order % cols)[:, None] * window + tx + shift) % wp
    images = torch.arange(batch, device=device)[None, :, None]  # (1, B, 1)
    gather = (images * (hp * wp) + (ys * wp + xs)[:, None, :]).flatten()  # (nW * B * N,) window-major
    rank = torch.empty_like(gather)
    rank[gather] = torch.arange(gather.numel(), device=device)  # padded-map row -> window-ordered row
    real = (torch.arange(h, device=device)[:, None] * wp + torch.arange(w, device=device)).flatten()  # (H*W,)
    scatter = rank.view(batch, hp * wp)[:, real].flatten()  # (B * H * W,)
    inside = ((ys < h) & (xs < w))[:, None, :].expand(-1, batch, -1).flatten()  # (nW * B * N,) real tokens
    origin = (images * (h * w) + (ys * w + xs)[:, None, :]).flatten().masked_fill(~inside, 0)
    plain = int(masked.numel() - masked.sum())
    return WindowPlan(gather, scatter, order, plain, hp, wp, rank, origin, (~inside).nonzero().flatten())


class _MoveRows(torch.autograd.Function):
    """x.index_select(0, index) for a one-to-one `index`, whose gradient is picked back by the inverse
    index: an index_select, where autograd's own would scatter-add into zeros (serial on the CPU)."""

    @staticmethod
    def forward(ctx, x, index, back, unpicked):  # noqa: ANN001, ANN205 - autograd.Function signature
        ctx.save_for_backward(back, unpicked)
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        back, unpicked = ctx.saved_tensors
        grad_x = grad.index_select(0, back)
        if unpicked.numel():
            grad_x.index_fill_(0, unpicked, 0)
        return grad_x, None, None, None


def move_rows(x: torch.Tensor, index: torch.Tensor, back: torch.Tensor, unpicked: torch.Tensor) -> torch.Tensor:
    """Rows `index` (M,) of x (R, C), each row of x picked at most once -> (M, C). `back` (R,): where each
    row of x went (any valid row for the `unpicked` rows (K,), whose gradient is zero)."""
    if not torch.is_grad_enabled():
        return x.index_select(0, index)
    return _MoveRows.apply(x, index, back, unpicked)

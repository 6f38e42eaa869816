"""CLLADetect: the TPH-YOLOv5++ head, whose finest level attends across layers (CLLA).

Cross-layer local attention (CLLA): each cell of a coarse map x2 (B, C, H, W) queries the `size x size`
cells of a finer map x1 that start at (2y - p, 2x - p), p = size // 2 - 1 (size 2: the 2 x 2 block that the
cell covers at twice the resolution; out-of-map cells are zeros). With q from x2 and k, v from those cells
(Linear maps over channels), the weights are softmax over the block of (2 * mean(s) - s) with
s = q . k / size; the released layer writes them that way, which equals softmax(-s): the block cells *least*
similar to the query get the most weight. The output is (x2 + sum of weighted v) / 2.

Computed without projecting the fine cells: the score of cell j is q . (Wk f_j + bk) / r, and q . bk / r is
the same for every cell of a block, so it drops out of the softmax; what remains is u . f_j with
u = -Wk^T q / r, one vector per coarse cell. Likewise the weights sum to one, so the weighted sum of
v_j = Wv f_j + bv is Wv (sum of weighted f_j) + bv: the value map is applied once per coarse cell, not to
every fine cell. The r x r blocks are strided views of x1 (`Tensor.unfold`; only sizes above 3 pad, and so
copy, x1), and the two per-cell contractions (scores, weighted sum) run over them in x1's memory order.
`CLLABlock` folds its 1x1 input convolution of x1 into Wk and Wv the same way, so x1 is not projected at
all; without gradients the folded maps are kept until a parameter changes.
Parameter names follow the released layout (`det.conv1`, `det.conv2`, `det.att.q/k/v`, `det.det`, `m.{i}`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.capture import capturing
from tphyolo.models.heads import DetectionHead

Pair = tuple[torch.Tensor, torch.Tensor]  # (weight, bias) of a linear map


class CLLA(nn.Module):
    """Cross-layer local attention: x1 (B, C, H1, W1), x2 (B, C, H, W) -> (B, C, H, W).

    Needs H1 >= 2 (H - 1) + size - 2p and likewise for W (H1 = 2H suffices for size 2); extra rows and
    columns of x1 at the bottom and right are ignored.
    """

    def __init__(self, size: int, c: int) -> None:
        super().__init__()
        if size < 2:
            raise InputError(f"CLLA: block size must be at least 2, got {size}")
        self.size = size
        self.q = nn.Linear(c, c)
        self.k = nn.Linear(c, c)
        self.v = nn.Linear(c, c)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return self.attend(x1, x2, *self.fold((self.k.weight, self.k.bias), (self.v.weight, self.v.bias)))

    def fold(self, key: Pair, value: Pair) -> tuple[Pair, Pair]:
        """The (query, value) maps that `attend` takes, from the key map (W_k (C, C_s), b_k (C,)) and the
        value map of the cells: query = (W (C_s + 1, C), b (C_s + 1,)) such that W x2 + b stacks
        u = -W_k^T q / r and t = -q . b_k / r for q = self.q(x2), so that -q . k_j / r = u . cell_j + t.
        (t is the same for all cells of a block and cancels in the softmax; it is kept so that b_k gets its
        gradient, zero up to rounding.) Computed in float32 outside autocast."""
        (key_weight, key_bias), q = key, self.q
        with torch.autocast(key_weight.device.type, enabled=False):
            to_key_space = torch.cat([key_weight, key_bias[:, None]], dim=1).t() / -self.size  # (C_s + 1, C)
            return (to_key_space @ q.weight, to_key_space @ q.bias), value

    def attend(self, source: torch.Tensor, x2: torch.Tensor, query: Pair, value: Pair) -> torch.Tensor:
        """CLLA of x2 (B, C, H, W) over the cells of `source` (B, C_s, H1, W1), with the maps of `fold`:
        `query` (C_s + 1, C) and `value` (W_v (C, C_s), b_v (C,)) -> (B, C, H, W). With `source` = x1 and
        the layer's own maps this is `forward`; a caller may fold a linear map of x1 into the key and value
        maps (exact when size // 2 - 1 = 0, i.e. no zero padding of the projected map)."""
        n, c, h, w = x2.shape
        (query_weight, query_bias), (value_weight, value_bias) = query, value
        if source.shape[0] != n or query_weight.shape != (source.shape[1] + 1, c):
            raise InputError(
                f"CLLA: fine map {tuple(source.shape)} and query map {tuple(query_weight.shape)} do not fit the "
                f"coarse map {tuple(x2.shape)}"
            )
        blocks = self._blocks(source, h, w)  # (B, C_s, H, r, W, r), a view
        r = self.size
        query = F.conv2d(x2, query_weight[:, :, None, None], query_bias)  # (B, C_s + 1, H, W)
        u, t = query[:, :-1], query[:, -1]  # (B, C_s, H, W), (B, H, W)
        logits = (blocks * u[:, :, :, None, :, None]).sum(1) + t[:, :, None, :, None]  # (B, H, r, W, r)
        cells = logits.transpose(2, 3).reshape(n, h, w, r * r)  # (B, H, W, r*r)
        weights = torch.softmax(cells, dim=-1).view(n, h, w, r, r).transpose(2, 3)  # = softmax(2 * mean - s)
        mixed = (blocks * weights.unsqueeze(1)).sum(5).sum(3)  # (B, C_s, H, W) weighted sum of the cells
        out = F.conv2d(mixed, value_weight[:, :, None, None], value_bias)  # (B, C, H, W) weighted sum of v
        return (out + x2) / 2

    def _blocks(self, x1: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """(B, C, H, r, W, r) view: the r x r cells of x1 (zero-padded by size // 2 - 1) of each coarse cell, in
        x1's own memory order when the blocks do not overlap (size 2), which keeps the products below fast."""
        r = self.size
        pad = r // 2 - 1
        if pad:
            x1 = F.pad(x1, (pad, pad, pad, pad))
        need_h, need_w = 2 * (h - 1) + r, 2 * (w - 1) + r
        if x1.shape[2] < need_h or x1.shape[3] < need_w:
            raise InputError(
                f"CLLA: fine map {tuple(x1.shape[2:])} (padded by {pad}) too small for coarse map {(h, w)}; "
                f"needs at least {(need_h, need_w)}"
            )
        x1 = x1[:, :, :need_h, :need_w]
        if r == 2:  # non-overlapping blocks: a plain view, which exporters can size at any input size
            return x1.unflatten(3, (w, 2)).unflatten(2, (h, 2))
        return x1.unfold(2, r, 2).unfold(3, r, 2).permute(0, 1, 2, 4, 3, 5)


class CLLABlock(nn.Module):
    """1x1 convolutions of both maps to `c` channels, CLLA, then a 1x1 output convolution:
    x1 (B, c1, H1, W1), x2 (B, c2, H, W) -> (B, c_out, H, W)."""

    def __init__(self, c: int, c1: int, c2: int, c_out: int, *, size: int = 2) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c1, c, 1)
        self.conv2 = nn.Conv2d(c2, c, 1)
        self.att = CLLA(size, c)
        self.det = nn.Conv2d(c, c_out, 1)
        self._folded: tuple[tuple, tuple[Pair, Pair]] | None = None

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        x2 = self.conv2(x2)
        if self.att.size // 2 - 1:  # x1 is zero-padded after conv1: conv1 does not fold
            return self.det(self.att(self.conv1(x1), x2))
        return self.det(self.att.attend(x1, x2, *self.folded()))

    def folded(self) -> tuple[Pair, Pair]:
        """`CLLA.fold` of the attention's maps with conv1 folded into its key and value maps. Recomputed on
        every call while a gradient is needed; otherwise kept until a parameter changes in place, moves
        or is replaced. Under graph capture it is part of the graph."""
        params = (self.conv1.weight, self.conv1.bias, *self.att.parameters())
        if capturing() or (torch.is_grad_enabled() and any(p.requires_grad for p in params)):
            return self._fold()
        stamp = tuple((p.data_ptr(), p._version) for p in params)
        if self._folded is None or self._folded[0] != stamp:
            with torch.inference_mode(False), torch.no_grad():
                self._folded = (stamp, self._fold())
        return self._folded[1]

    def _fold(self) -> tuple[Pair, Pair]:
        att = self.att
        projection, shift = self.conv1.weight.flatten(1), self.conv1.bias  # (c, c1), (c,)
        with torch.autocast(projection.device.type, enabled=False):
            key = (att.k.weight @ projection, att.k.weight @ shift + att.k.bias)
            value = (att.v.weight @ projection, att.v.weight @ shift + att.v.bias)
        return att.fold(key, value)


class CLLADetect(DetectionHead):
    """TPH-YOLOv5++ head (the `DetectionHead` contract): inputs (x_src, x_1, ..., x_nl), where x_src is a
    finer map (typically P2) used only as the cross-layer source of the first level. Level 0 is
    CLLABlock(x_src, x_1) at x_1's resolution; level l >= 1 is a 1x1 convolution of x_{l+1}. So nl = len(ch) - 1.
    """

    def __init__(self, nc: int, anchors: Sequence[Sequence[float]], ch: Sequence[int]) -> None:
        super().__init__(nc, anchors)
        if len(ch) != self.nl + 1:
            raise InputError(
                f"CLLADetect: {len(ch)} input maps but {self.nl} anchor levels (needs one more input: the "
                "cross-layer source first)"
            )
        self.det = CLLABlock(ch[0], ch[0], ch[1], self.no * self.na)
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch[2:])

    @classmethod
    def num_levels(cls, num_inputs: int) -> int:
        return num_inputs - 1

    def predict_levels(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        if len(xs) != self.nl + 1:
            raise InputError(f"CLLADetect: expected {self.nl + 1} input maps, got {len(xs)}")
        return [self.det(xs[0], xs[1]), *(conv(x) for conv, x in zip(self.m, xs[2:], strict=True))]

    def output_convs(self) -> list[nn.Conv2d]:
        return [self.det.det, *self.m]

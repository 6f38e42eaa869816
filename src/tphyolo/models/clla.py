"""CLLADetect: the TPH-YOLOv5++ head, whose finest level attends across layers (CLLA).

Cross-layer local attention (CLLA): each cell of a coarse map x2 (B, C, H, W) queries the `size x size`
cells of a finer map x1 that start at (2y - p, 2x - p), p = size // 2 - 1 (size 2: the 2 x 2 block that the
cell covers at twice the resolution; out-of-map cells are zeros). With q from x2 and k, v from those cells
(Linear maps over channels), the weights are softmax over the block of (2 * mean(s) - s) with
s = q . k / size; the released layer writes them that way, which equals softmax(-s): the block cells *least*
similar to the query get the most weight. The output is (x2 + sum of weighted v) / 2.

All cells are computed at once (`F.unfold` gathers the blocks); parameter names follow the released layout
(`det.conv1`, `det.conv2`, `det.att.q/k/v`, `det.det`, `m.{i}`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tphyolo.models.heads import DetectionHead


class CLLA(nn.Module):
    """Cross-layer local attention: x1 (B, C, H1, W1), x2 (B, C, H, W) -> (B, C, H, W).

    Needs H1 >= 2 (H - 1) + size - 2p and likewise for W (H1 = 2H suffices for size 2); extra rows and
    columns of x1 at the bottom and right are ignored.
    """

    def __init__(self, size: int, c: int) -> None:
        super().__init__()
        if size < 2:
            raise ValueError(f"CLLA: block size must be at least 2, got {size}")
        self.size = size
        self.q = nn.Linear(c, c)
        self.k = nn.Linear(c, c)
        self.v = nn.Linear(c, c)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x2.shape
        if x1.shape[:2] != x2.shape[:2]:
            raise ValueError(f"CLLA: maps differ in batch or channels: {tuple(x1.shape)} vs {tuple(x2.shape)}")
        r = self.size
        pad = r // 2 - 1
        x1 = F.pad(x1, (pad, pad, pad, pad))
        need_h, need_w = 2 * (h - 1) + r, 2 * (w - 1) + r
        if x1.shape[2] < need_h or x1.shape[3] < need_w:
            raise ValueError(
                f"CLLA: fine map {tuple(x1.shape[2:])} (padded by {pad}) too small for coarse map {(h, w)}; "
                f"needs at least {(need_h, need_w)}"
            )
        blocks = F.unfold(x1[:, :, :need_h, :need_w], kernel_size=r, stride=2)  # (B, C * r * r, H * W)
        blocks = blocks.view(n, c, r * r, h, w).permute(0, 3, 4, 2, 1)  # (B, H, W, r*r, C)
        q = self.q(x2.permute(0, 2, 3, 1)).unsqueeze(-1)  # (B, H, W, C, 1)
        k, v = self.k(blocks), self.v(blocks)  # (B, H, W, r*r, C)
        scores = (k @ q).squeeze(-1) / r  # (B, H, W, r*r)
        weights = torch.softmax(-scores, dim=-1)  # = softmax(2 * mean - scores)
        out = (weights.unsqueeze(-2) @ v).squeeze(-2)  # (B, H, W, C)
        return (out.permute(0, 3, 1, 2) + x2) / 2  # (B, C, H, W)


class CLLABlock(nn.Module):
    """1x1 convolutions of both maps to `c` channels, CLLA, then a 1x1 output convolution:
    x1 (B, c1, H1, W1), x2 (B, c2, H, W) -> (B, c_out, H, W)."""

    def __init__(self, c: int, c1: int, c2: int, c_out: int, *, size: int = 2) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c1, c, 1)
        self.conv2 = nn.Conv2d(c2, c, 1)
        self.att = CLLA(size, c)
        self.det = nn.Conv2d(c, c_out, 1)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return self.det(self.att(self.conv1(x1), self.conv2(x2)))


class CLLADetect(DetectionHead):
    """TPH-YOLOv5++ head (the `DetectionHead` contract): inputs (x_src, x_1, ..., x_nl), where x_src is a
    finer map (typically P2) used only as the cross-layer source of the first level. Level 0 is
    CLLABlock(x_src, x_1) at x_1's resolution; level l >= 1 is a 1x1 convolution of x_{l+1}. So nl = len(ch) - 1.
    """

    def __init__(self, nc: int, anchors: Sequence[Sequence[float]], ch: Sequence[int]) -> None:
        super().__init__(nc, anchors)
        if len(ch) != self.nl + 1:
            raise ValueError(
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
            raise ValueError(f"CLLADetect: expected {self.nl + 1} input maps, got {len(xs)}")
        return [self.det(xs[0], xs[1]), *(conv(x) for conv, x in zip(self.m, xs[2:], strict=True))]

    def output_convs(self) -> list[nn.Conv2d]:
        return [self.det.det, *self.m]

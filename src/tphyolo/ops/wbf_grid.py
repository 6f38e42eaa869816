"""Weighted boxes fusion's clustering of one large group of boxes, each box compared only with nearby clusters.

`tphyolo.ops.wbf` visits the boxes of a label one by one: a box joins the cluster whose fused box overlaps it
most (IoU > threshold t, the first such cluster on ties) or opens one. Compared with every cluster, that costs
boxes x clusters. Here the clusters sit in a grid of square cells by the centre of their fused box, and a box
is compared only with those whose centre lies near its own. Near enough means, along x (and alike along y),
a centre distance under

    R = min((w + W) / 2, rho(t) * w),   rho(t) = 1 - t for t >= 1/2, (1/t - 1) / 2 below,

w being the box's width and W the widest fused box so far: a cluster farther away cannot overlap the box
(first term), or overlaps it by IoU <= t (second: an IoU above t needs an overlap wider than t times either
width, so the widths lie within a factor 1/t and the centres within rho(t) * w). R is widened by a relative
1e-6 so that float rounding of the IoU cannot matter. The cells are about half the group's typical box side.

Scores of zero: a cluster all of whose members score zero gets a NaN fused box (0 / 0) at its second member,
as in the numpy original; a NaN overlap wins the comparison, so every later box of the label joins it.

The arithmetic is the numpy original's, operation for operation (IoU in float64, box sums and fused boxes of
two or more members rounded to float32), so that the results are equal bit for bit.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

# cells are this many times finer than the group's median box side (benchmarks/wbf_vs_ensemble_boxes.py)
CELLS_PER_BOX_SIDE = 2
MAX_CELLS_PER_SIDE = 4096  # the finest grid: cells no smaller than 1/4096 of the image side
_WIDENED = 1.0 + 1e-6


def reach(iou_thr: float) -> float:
    """rho(t) of the module docstring: how many box widths apart two centres may lie for an IoU above t."""
    if iou_thr <= 0.0:
        return math.inf
    return 1.0 - iou_thr if iou_thr >= 0.5 else (1.0 / iou_thr - 1.0) / 2.0


def grid_clusters(boxes: np.ndarray, scores: np.ndarray, weights: np.ndarray, iou_thr: float):
    """Cluster one group: boxes (n, 4) float64 normalised xyxy of positive area in visit order, their weighted
    scores (n,) >= 0 and model weights (n,). Returns each box's cluster index (n,), whether it opened its
    cluster (n,), per cluster: sums (k, 6) of score * box (float32-rounded), score and weight; fused boxes
    (k, 4)."""
    n = len(boxes)
    sides = np.maximum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    per_side = int(min(max(CELLS_PER_BOX_SIDE / float(np.median(sides)), 1.0), MAX_CELLS_PER_SIDE))
    top = per_side - 1
    rho = reach(iou_thr)

    def cell(v: float) -> int:
        i = int(v * per_side)
        return 0 if i < 0 else top if i > top else i

    grid: dict[int, list[int]] = {}  # cell -> clusters whose fused centre lies in it
    home: list[int] = []  # each cluster's cell (-1: none, a NaN box)
    fused: list[tuple[float, float, float, float]] = []
    areas: list[float] = []
    box_sums = array("f")  # 4 per cluster: float32, as the original rounds them
    score_sums: list[float] = []
    weight_sums: list[float] = []
    rounded = array("f", bytes(16))
    cluster, opened = np.empty(n, dtype=np.int64), np.zeros(n, dtype=bool)
    widest = tallest = 0.0
    nan_cluster = -1

    def place(c: int) -> None:
        """Keep cluster c in the cell of its fused box's centre."""
        f = fused[c]
        now = cell((f[0] + f[2]) * 0.5) * per_side + cell((f[1] + f[3]) * 0.5)
        if home[c] != now:
            if home[c] >= 0:
                grid[home[c]].remove(c)
            grid.setdefault(now, []).append(c)
            home[c] = now

    for i, ((x1, y1, x2, y2), s, w) in enumerate(zip(boxes.tolist(), scores.tolist(), weights.tolist(), strict=True)):
        area = (x2 - x1) * (y2 - y1)
        best = nan_cluster  # a NaN overlap wins every comparison
        if best < 0:
            bw, bh = x2 - x1, y2 - y1
            rx = min((bw + widest) * 0.5, rho * bw) * _WIDENED
            ry = min((bh + tallest) * 0.5, rho * bh) * _WIDENED
            cx, cy = (x1 + x2) * 0.5, (y1 + y2) * 0.5
            ix1, ix2, iy1, iy2 = cell(cx - rx), cell(cx + rx), cell(cy - ry), cell(cy + ry)
            if (ix2 - ix1 + 1) * (iy2 - iy1 + 1) > len(fused):
                near = [range(len(fused))]
            else:
                keys = (k for ix in range(ix1, ix2 + 1) for k in range(ix * per_side + iy1, ix * per_side + iy2 + 1))
                near = [grid[k] for k in keys if k in grid]
            best_iou = iou_thr
            for members in near:
                for c in members:  # the largest overlap above the threshold, the first cluster among equals
                    fx1, fy1, fx2, fy2 = fused[c]
                    if fx1 >= x2 or fx2 <= x1 or fy1 >= y2 or fy2 <= y1:
                        continue  # no overlap: never above a threshold >= 0
                    inter = ((fx2 if fx2 < x2 else x2) - (fx1 if fx1 > x1 else x1)) * (
                        (fy2 if fy2 < y2 else y2) - (fy1 if fy1 > y1 else y1)
                    )
                    iou = inter / (areas[c] + area - inter)
                    if iou > best_iou or (iou == best_iou and 0 <= c < best):
                        best_iou, best = iou, c
        cluster[i] = best
        if best < 0:  # a new cluster, its fused box the box itself
            cluster[i] = len(fused)
            opened[i] = True
            box_sums.extend((x1 * s, y1 * s, x2 * s, y2 * s))
            score_sums.append(s)
            weight_sums.append(w)
            fused.append((x1, y1, x2, y2))
            areas.append(area)
            home.append(-1)
            place(len(fused) - 1)
            widest, tallest = max(widest, x2 - x1), max(tallest, y2 - y1)
            continue
        k = 4 * best
        box_sums[k], box_sums[k + 1] = box_sums[k] + x1 * s, box_sums[k + 1] + y1 * s
        box_sums[k + 2], box_sums[k + 3] = box_sums[k + 2] + x2 * s, box_sums[k + 3] + y2 * s
        score_sums[best] += s
        weight_sums[best] += w
        total = score_sums[best]
        if best == nan_cluster:
            continue
        if total == 0.0:  # every member scores zero: 0 / 0
            fused[best], areas[best], nan_cluster = (math.nan,) * 4, math.nan, best
            grid[home[best]].remove(best)
            home[best] = -1
            continue
        for j in range(4):
            rounded[j] = box_sums[k + j] / total
        f = fused[best] = tuple(rounded)
        areas[best] = (f[2] - f[0]) * (f[3] - f[1])
        widest, tallest = max(widest, f[2] - f[0]), max(tallest, f[3] - f[1])
        place(best)
    k = len(fused)
    sums = np.column_stack(
        (np.asarray(box_sums, dtype=np.float64).reshape(k, 4), np.asarray(score_sums), np.asarray(weight_sums))
    )
    return cluster, opened, sums.reshape(k, 6), np.asarray(fused, dtype=np.float64).reshape(k, 4)

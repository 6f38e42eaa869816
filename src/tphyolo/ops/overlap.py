"""How much two boxes overlap, by one of two measures, and which boxes of a set overlap enough.

"iou": intersection over union. "ios": intersection over the smaller box's area -- 1 when one box lies inside
the other, the measure that finds the two halves of an object cut by a slice edge, or a part inside the whole.
Boxes are (n, 4) xyxy numpy arrays; a box without area overlaps nothing.
"""

from __future__ import annotations

import numpy as np

from tphyolo.errors import InputError

MATCH_MEASURES = ("iou", "ios")
_ROWS_PER_BLOCK = 128  # boxes measured at a time against their neighbours (`overlapping_pairs`)


def _check_measure(measure: str) -> None:
    if measure not in MATCH_MEASURES:
        raise InputError(f"unknown overlap measure {measure!r}; known: {list(MATCH_MEASURES)}")


def box_overlap(boxes1: np.ndarray, boxes2: np.ndarray, measure: str = "iou") -> np.ndarray:
    """(n, 4) and (m, 4) xyxy -> (n, m) float64 overlap of every pair by `measure` ("iou" or "ios")."""
    _check_measure(measure)
    a = np.asarray(boxes1, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(boxes2, dtype=np.float64).reshape(-1, 4)
    wide = (np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])).clip(min=0)
    high = (np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])).clip(min=0)
    inter = wide * high  # (n, m)
    area_a = (a[:, 2] - a[:, 0]).clip(min=0) * (a[:, 3] - a[:, 1]).clip(min=0)
    area_b = (b[:, 2] - b[:, 0]).clip(min=0) * (b[:, 3] - b[:, 1]).clip(min=0)
    if measure == "iou":
        base = area_a[:, None] + area_b[None, :] - inter
    else:
        base = np.minimum(area_a[:, None], area_b[None, :])
    return np.divide(inter, base, out=np.zeros_like(inter), where=base > 0)


def overlapping_pairs(boxes: np.ndarray, threshold: float, measure: str = "iou") -> list[np.ndarray]:
    """For (n, 4) xyxy boxes: for each box i, the indices j != i (in no set order) that overlap i (> 0) by at
    least `threshold` by `measure`.

    Boxes are binned into square cells as large as the largest box side, by their top-left corner: two boxes
    that overlap lie in the same or neighbouring cells. Up to _ROWS_PER_BLOCK boxes of one row of cells are
    measured at a time against the boxes of the three cell rows around them, so time and memory grow with the
    boxes nearby, not with n x n: an orthomosaic's hundreds of thousands of boxes merge in seconds."""
    _check_measure(measure)
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    matches: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(boxes)
    if len(boxes) == 0:
        return matches
    cell = max(float((boxes[:, 2:] - boxes[:, :2]).max()), 1.0)
    col = np.floor((boxes[:, 0] - boxes[:, 0].min()) / cell).astype(np.int64)
    row = np.floor((boxes[:, 1] - boxes[:, 1].min()) / cell).astype(np.int64)
    cols = int(col.max()) + 3  # room for col + 1 without reaching the next row's keys
    key = row * cols + col + 1
    order = np.argsort(key, kind="stable")
    keys = key[order]
    row_starts = np.flatnonzero(np.r_[True, np.diff(row[order]) != 0])
    for a, b in zip(row_starts, np.r_[row_starts[1:], len(order)], strict=True):
        for first in range(a, b, _ROWS_PER_BLOCK):
            members = order[first : min(first + _ROWS_PER_BLOCK, b)]
            r, lo, hi = int(row[members[0]]), int(col[members].min()), int(col[members].max())
            spans = [
                order[np.searchsorted(keys, near * cols + lo) : np.searchsorted(keys, near * cols + hi + 2, "right")]
                for near in (r - 1, r, r + 1)
            ]
            candidates = np.concatenate(spans)
            overlap = box_overlap(boxes[members], boxes[candidates], measure)  # (b, c)
            hit = (overlap >= threshold) & (overlap > 0) & (members[:, None] != candidates[None, :])
            _, column = np.nonzero(hit)  # by row
            found = np.split(candidates[column], np.cumsum(hit.sum(1))[:-1])
            for i, pairs in zip(members.tolist(), found, strict=True):
                matches[i] = pairs
    return matches


def class_groups(labels: np.ndarray, *, agnostic: bool = False) -> list[np.ndarray]:
    """The indices of (n,) `labels` that are compared with each other: one group per class id (the labels as
    integers, ascending), or all of them in one group with `agnostic`."""
    labels = np.asarray(labels).reshape(-1).astype(np.int64)
    if agnostic:
        return [np.arange(len(labels))] if len(labels) else []
    return [np.flatnonzero(labels == c) for c in np.unique(labels)]

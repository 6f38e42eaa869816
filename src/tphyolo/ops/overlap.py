"""How much two boxes overlap, by one of two measures, and which boxes of a set overlap enough.

"iou": intersection over union. "ios": intersection over the smaller box's area -- 1 when one box lies inside
the other, the measure that finds the two halves of an object cut by a slice edge, or a part inside the whole.
Boxes are (n, 4) xyxy numpy arrays; a box without area overlaps nothing.
"""

from __future__ import annotations

import numpy as np

MATCH_MEASURES = ("iou", "ios")
_ROWS_PER_BLOCK = 1024  # pairs are measured a block of rows at a time: memory ~ block x n, not n x n


def _check_measure(measure: str) -> None:
    if measure not in MATCH_MEASURES:
        raise ValueError(f"unknown overlap measure {measure!r}; known: {list(MATCH_MEASURES)}")


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
    """For (n, 4) xyxy boxes: for each box i, the indices j != i (ascending) whose overlap with i by `measure`
    is at least `threshold`. Memory stays ~1024 x n whatever n."""
    _check_measure(measure)
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    matches: list[np.ndarray] = []
    for start in range(0, len(boxes), _ROWS_PER_BLOCK):
        block = box_overlap(boxes[start : start + _ROWS_PER_BLOCK], boxes, measure) >= threshold  # (b, n)
        block[np.arange(len(block)), np.arange(start, start + len(block))] = False
        matches.extend(np.flatnonzero(row) for row in block)
    return matches


def class_groups(labels: np.ndarray, *, agnostic: bool = False) -> list[np.ndarray]:
    """The indices of (n,) `labels` that are compared with each other: one group per class (ascending), or all of
    them in one group with `agnostic`."""
    labels = np.asarray(labels).reshape(-1)
    if agnostic:
        return [np.arange(len(labels))] if len(labels) else []
    return [np.flatnonzero(labels == c) for c in np.unique(labels)]

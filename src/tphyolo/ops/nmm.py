"""Non-maximum merging (NMM) and its greedy form, as SAHI defines them for joining the detections of slices.

Where non-maximum suppression keeps the best box of a group of overlapping boxes and drops the others, merging
grows the best box instead: each merged pair becomes the box that encloses both (their union hull), scoring the
higher of the two scores, with the class of the higher-scoring box (the member's on a tie). Boxes "match" when
their overlap by `measure` ("iou" or "ios", `tphyolo.ops.overlap`) is at least `threshold`; within each class
unless `agnostic`.

Greedy NMM visits the boxes by descending score; the best box left becomes a keeper and takes every box left that
matches it (its own box, before any merging); those leave the pool.

NMM visits every box by descending score. An unassigned box becomes a keeper and takes the unassigned boxes that
match it; a box already taken passes the unassigned boxes that match it on to its keeper. A chain A-B-C (A matches
B, B matches C, A does not match C) thus ends in one keeper A with members B and C, where greedy NMM gives A+B
and C.

Then, for both: each keeper meets its members in the order they were taken, and merges with a member only when
the keeper's box as merged so far still overlaps it by at least `threshold`; a member that no longer does is
dropped. Taken in the greedy form by descending score; in NMM, the members each visit adds by ascending score.
"""

from __future__ import annotations

import numpy as np

from tphyolo.ops.overlap import box_overlap, class_groups, overlapping_pairs


def by_score(scores: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """The visit order of (n,) `scores` of (n, 4) xyxy `boxes`: by descending score, equal scores by ascending
    x1, then y1, x2, y2 (SAHI's tie-break: the order does not depend on how the boxes were listed, and an
    untrained or quantised network gives many equal scores)."""
    boxes = np.asarray(boxes).reshape(-1, 4)
    return np.lexsort((boxes[:, 3], boxes[:, 2], boxes[:, 1], boxes[:, 0], -np.asarray(scores)))


def greedy_members(boxes: np.ndarray, scores: np.ndarray, threshold: float, measure: str) -> dict[int, list[int]]:
    """Greedy NMM's keepers (by descending score) -> the boxes each takes (by descending score)."""
    matches = overlapping_pairs(boxes, threshold, measure)
    order = by_score(scores, boxes)
    rank = np.empty(len(scores), dtype=np.int64)
    rank[order] = np.arange(len(scores))
    taken = np.zeros(len(scores), dtype=bool)
    members: dict[int, list[int]] = {}
    for keeper in order.tolist():
        if taken[keeper]:
            continue
        taken[keeper] = True
        mine = [j for j in matches[keeper].tolist() if not taken[j]]
        mine.sort(key=lambda j: rank[j])
        taken[mine] = True
        members[keeper] = mine
    return members


def nmm_members(boxes: np.ndarray, scores: np.ndarray, threshold: float, measure: str) -> dict[int, list[int]]:
    """NMM's keepers (in the order they appear) -> the boxes each takes, in the order they are taken."""
    matches = overlapping_pairs(boxes, threshold, measure)
    order = by_score(scores, boxes)
    rank = np.empty(len(scores), dtype=np.int64)
    rank[order] = np.arange(len(scores))
    keeper_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for box in order.tolist():
        keeper = keeper_of.get(box)
        if keeper is None:
            keeper = box
            members[box] = []
        for j in sorted(matches[box].tolist(), key=lambda j: -rank[j]):  # ascending score
            if j not in keeper_of and j not in members:
                members[keeper].append(j)
                keeper_of[j] = keeper
    return members


def _merge_members(rows: np.ndarray, members: dict[int, list[int]], threshold: float, measure: str) -> np.ndarray:
    """Each keeper's row grown by its members (see the module docstring); (k, 6) rows, one per keeper."""
    out = []
    for keeper, taken in members.items():
        row = rows[keeper].copy()
        for j in taken:
            other = rows[j]
            if box_overlap(row[None, :4], other[None, :4], measure)[0, 0] >= threshold:
                row[:2] = np.minimum(row[:2], other[:2])
                row[2:4] = np.maximum(row[2:4], other[2:4])
                if other[4] >= row[4]:  # the class of the higher score; the member's on a tie
                    row[4:6] = other[4:6]
        out.append(row)
    return np.stack(out) if out else np.zeros((0, 6))


def non_maximum_merge(
    rows: np.ndarray, *, threshold: float = 0.5, measure: str = "iou", greedy: bool = True, agnostic: bool = False
) -> np.ndarray:
    """Merge overlapping detections: (n, 6) rows x1, y1, x2, y2, score, class -> (k, 6) float64 rows, k <= n,
    by descending score. greedy: greedy NMM, else NMM (module docstring); measure: "iou" or "ios"; agnostic:
    boxes of different classes merge too."""
    rows = np.asarray(rows, dtype=np.float64).reshape(-1, 6)
    find = greedy_members if greedy else nmm_members
    merged = []
    for group in class_groups(rows[:, 5], agnostic=agnostic):
        members = find(rows[group, :4], rows[group, 4], threshold, measure)
        merged.append(_merge_members(rows[group], members, threshold, measure))
    out = np.concatenate(merged) if merged else np.zeros((0, 6))
    return out[by_score(out[:, 4], out[:, :4])]

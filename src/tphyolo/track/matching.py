"""Association of tracks with detections: the pairs that overlap, and a minimum-cost matching with a cost limit.

`match(cost, limit)` solves the same problem as LAPJV with `extend_cost=True, cost_limit=limit` (the matching
ByteTrack and BoT-SORT use): every row and column may stay unmatched at a price of `limit / 2`, so a pair is
matched only when that makes the total cheaper, and a pair costing `limit` or more never is. The problem falls
apart into the connected parts of the graph of allowed pairs; a part that is a single pair is matched at once,
and only the rest goes to `scipy.optimize.linear_sum_assignment`.

Small objects seen from above overlap few others, so the tracker works on pairs, not matrices: `overlaps` finds
the (track, detection) pairs whose boxes intersect and their IoU, and `match_pairs` matches a list of pairs; a
frame of 100 tracks and 100 detections then costs a few passes over 10,000 booleans and work on some hundred
pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Matching:
    """The result of `match`: `pairs` (K, 2) int64 (row, column) matched, and the rows and columns left
    unmatched, each ascending."""

    pairs: np.ndarray
    unmatched_rows: np.ndarray
    unmatched_cols: np.ndarray


def overlaps(boxes1: np.ndarray, boxes2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of (N, 4) and (M, 4) xyxy boxes that intersect: (i (K,), j (K,), IoU (K,) float64), by i then j.
    Pairs absent have IoU 0."""
    a, b = np.asarray(boxes1, dtype=np.float64), np.asarray(boxes2, dtype=np.float64)
    hit = (a[:, None, 0] < b[None, :, 2]) & (b[None, :, 0] < a[:, None, 2])
    hit &= a[:, None, 1] < b[None, :, 3]
    hit &= b[None, :, 1] < a[:, None, 3]
    i, j = np.nonzero(hit)
    a, b = a[i], b[j]
    inter = (np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0])) * (
        np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1])
    )
    union = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    return i, j, np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def match(cost: np.ndarray, limit: float) -> Matching:
    """Minimum-cost matching of the rows and columns of `cost` (N, M) where leaving a row or a column unmatched
    costs `limit / 2` (see the module docstring). Entries that are NaN or +inf are never matched."""
    cost = np.asarray(cost, dtype=np.float64)
    n_rows, n_cols = cost.shape
    rows, cols = np.nonzero(cost < limit)  # NaN compares False
    pairs = match_pairs(rows, cols, cost[rows, cols], limit)
    left_rows, left_cols = np.ones(n_rows, dtype=bool), np.ones(n_cols, dtype=bool)
    left_rows[pairs[:, 0]] = left_cols[pairs[:, 1]] = False
    return Matching(pairs, np.flatnonzero(left_rows), np.flatnonzero(left_cols))


def match_pairs(rows: np.ndarray, cols: np.ndarray, cost: np.ndarray, limit: float) -> np.ndarray:
    """`match` on a list of candidate pairs (row ids and column ids, whole numbers >= 0, and costs, each (K,);
    a pair not listed is never matched, nor is one costing `limit` or more): the matched (row, column) pairs,
    (P, 2) int64, by row."""
    keep = cost < limit
    rows, cols, cost = rows[keep], cols[keep], cost[keep]
    if not len(rows):
        return np.zeros((0, 2), np.int64)
    single = (np.bincount(rows)[rows] == 1) & (np.bincount(cols)[cols] == 1)  # a part of one pair: matched
    pair_rows, pair_cols = rows[single], cols[single]
    if not single.all():
        busy = ~single
        sub_rows, sub_cols = _solve_pairs(rows[busy], cols[busy], cost[busy], limit)
        pair_rows, pair_cols = np.concatenate([pair_rows, sub_rows]), np.concatenate([pair_cols, sub_cols])
    pairs = np.empty((len(pair_rows), 2), np.int64)
    order = np.argsort(pair_rows, kind="stable")
    pairs[:, 0], pairs[:, 1] = pair_rows[order], pair_cols[order]
    return pairs


def _solve_pairs(rows: np.ndarray, cols: np.ndarray, cost: np.ndarray, limit: float) -> tuple[np.ndarray, ...]:
    """The matched (rows, cols) among candidate pairs, solved as one square (n + m) problem in which each row
    and column may instead take a dummy partner at `limit / 2`, as LAPJV's `extend_cost` builds it."""
    from scipy.optimize import linear_sum_assignment

    row_ids, col_ids = np.array(sorted(set(rows.tolist()))), np.array(sorted(set(cols.tolist())))  # a few each
    r, c = np.searchsorted(row_ids, rows), np.searchsorted(col_ids, cols)
    n, m = len(row_ids), len(col_ids)
    forbidden = (n + m + 1) * max(limit, 1.0) + 1.0  # dearer than any assignment without forbidden pairs
    square = np.full((n + m, m + n), forbidden)
    square[r, c] = cost
    square[np.arange(n), m + np.arange(n)] = limit / 2  # row i left unmatched
    square[n + np.arange(m), np.arange(m)] = limit / 2  # column j left unmatched
    square[n:, m:] = 0.0  # dummies with dummies
    sub_rows, sub_cols = linear_sum_assignment(square)
    real = (sub_rows < n) & (sub_cols < m)
    sub_rows, sub_cols = sub_rows[real], sub_cols[real]
    allowed = square[sub_rows, sub_cols] < forbidden
    return row_ids[sub_rows[allowed]], col_ids[sub_cols[allowed]]

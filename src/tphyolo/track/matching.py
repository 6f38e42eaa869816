"""Association of tracks with detections: a minimum-cost matching with a cost limit.

`match(cost, limit)` solves the same problem as LAPJV with `extend_cost=True, cost_limit=limit` (the matching
ByteTrack and BoT-SORT use): every row and column may stay unmatched at a price of `limit / 2`, so a pair is
matched only when that makes the total cheaper, and a pair costing `limit` or more never is. The problem falls
apart into the connected parts of the graph of allowed pairs; a part that is a single pair is matched at once,
and only the rest goes to `scipy.optimize.linear_sum_assignment`. In a frame of small objects most parts are
single pairs, which keeps the matching of 100 tracks with 100 detections in the tens of microseconds.
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


def match(cost: np.ndarray, limit: float) -> Matching:
    """Minimum-cost matching of the rows and columns of `cost` (N, M) where leaving a row or a column unmatched
    costs `limit / 2` (see the module docstring). Entries that are NaN or +inf are never matched."""
    cost = np.asarray(cost, dtype=np.float64)
    n_rows, n_cols = cost.shape
    allowed = cost < limit  # NaN compares False
    rows_degree, cols_degree = allowed.sum(1), allowed.sum(0)
    pair_rows, pair_cols = np.nonzero(allowed & (rows_degree == 1)[:, None] & (cols_degree == 1)[None, :])
    busy_rows, busy_cols = rows_degree > 0, cols_degree > 0
    busy_rows[pair_rows] = busy_cols[pair_cols] = False  # rows and columns of the single pairs are settled
    if busy_rows.any():
        busy_rows, busy_cols = np.flatnonzero(busy_rows), np.flatnonzero(busy_cols)
        sub = np.ix_(busy_rows, busy_cols)
        sub_rows, sub_cols = _solve_extended(cost[sub], allowed[sub], limit)
        pair_rows = np.concatenate([pair_rows, busy_rows[sub_rows]])
        pair_cols = np.concatenate([pair_cols, busy_cols[sub_cols]])
    pairs = np.empty((len(pair_rows), 2), np.int64)
    order = np.argsort(pair_rows, kind="stable")
    pairs[:, 0], pairs[:, 1] = pair_rows[order], pair_cols[order]
    left_rows, left_cols = np.ones(n_rows, dtype=bool), np.ones(n_cols, dtype=bool)
    left_rows[pair_rows] = left_cols[pair_cols] = False
    return Matching(pairs, np.flatnonzero(left_rows), np.flatnonzero(left_cols))


def _solve_extended(cost: np.ndarray, allowed: np.ndarray, limit: float) -> tuple[np.ndarray, np.ndarray]:
    """The matched (rows, cols) of `cost` (n, m) when each row and column may instead take a dummy partner at
    `limit / 2`: a square (n + m) problem, as LAPJV's `extend_cost` builds it."""
    from scipy.optimize import linear_sum_assignment

    n, m = cost.shape
    forbidden = (n + m + 1) * max(limit, 1.0) + 1.0  # dearer than any assignment without forbidden pairs
    square = np.full((n + m, m + n), forbidden)
    square[:n, :m] = np.where(allowed, cost, forbidden)
    square[np.arange(n), m + np.arange(n)] = limit / 2  # row i left unmatched
    square[n + np.arange(m), np.arange(m)] = limit / 2  # column j left unmatched
    square[n:, m:] = 0.0  # dummies with dummies
    rows, cols = linear_sum_assignment(square)
    real = (rows < n) & (cols < m)
    rows, cols = rows[real], cols[real]
    keep = allowed[rows, cols]
    return rows[keep], cols[keep]

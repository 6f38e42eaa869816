"""Plane geometry of counting lines and zones, in image coordinates (x right, y down), vectorised over points.

A line is a polyline (K >= 2 points, first -> last is its direction). A point is on the line's left when the
cross product (B - A) x (p - A) = dx * (py - Ay) - dy * (px - Ax) is negative, on its right when positive, for
the segment A -> B of the polyline nearest the point. A zone is a simple polygon (K >= 3 points, no two edges
crossing), closed from its last point back to its first.
"""

from __future__ import annotations

import numpy as np


def signed_distance(points: np.ndarray, polyline: np.ndarray, *, closed: bool = False) -> np.ndarray:
    """(N,) distance of each point (N, 2) to the nearest segment of `polyline` (K, 2), negative on that
    segment's left, positive on its right (`closed`: with the segment from the last point back to the first)."""
    a, b = _segments(polyline, closed=closed)  # (S, 2) each
    d = b - a
    rel = points[:, None, :] - a[None]  # (N, S, 2)
    t = (rel * d).sum(-1) / np.maximum((d**2).sum(1), 1e-12)
    t = np.minimum(np.maximum(t, 0.0), 1.0)  # np.clip costs more on a few points
    gap = rel - t[..., None] * d
    distance = np.sqrt((gap**2).sum(-1))
    if distance.shape[1] == 1:
        nearest, cross = np.zeros(len(points), np.int64), d[0, 0] * rel[:, 0, 1] - d[0, 1] * rel[:, 0, 0]
    else:
        nearest = distance.argmin(1)
        rows = np.arange(len(points))
        cross = d[nearest, 0] * rel[rows, nearest, 1] - d[nearest, 1] * rel[rows, nearest, 0]
    return np.where(cross < 0, -1.0, 1.0) * distance[np.arange(len(points)), nearest]


def signed_distances(points: np.ndarray, polylines: list[np.ndarray]) -> np.ndarray:
    """(N, L) `signed_distance` of each point (N, 2) to each of the L open polylines, in one pass over all
    their segments (the cost of one polyline, not L)."""
    starts = np.cumsum([0] + [len(p) - 1 for p in polylines])
    a = np.concatenate([p[:-1] for p in polylines])  # (S, 2)
    d = np.concatenate([p[1:] for p in polylines]) - a
    rel = points[:, None, :] - a[None]  # (N, S, 2)
    t = (rel * d).sum(-1) / np.maximum((d**2).sum(1), 1e-12)
    t = np.minimum(np.maximum(t, 0.0), 1.0)
    gap = rel - t[..., None] * d
    distance = np.sqrt((gap**2).sum(-1))  # (N, S)
    signed = np.where(d[:, 0] * rel[..., 1] - d[:, 1] * rel[..., 0] < 0, -distance, distance)
    if starts[-1] == len(polylines):  # every polyline one segment: a column each
        return signed
    rows = np.arange(len(points))
    columns = [signed[rows, s0 + distance[:, s0:s1].argmin(1)] for s0, s1 in zip(starts[:-1], starts[1:], strict=True)]
    return np.stack(columns, axis=1) if columns else np.zeros((len(points), 0))


def paths_cross(start: np.ndarray, end: np.ndarray, polyline: np.ndarray) -> np.ndarray:
    """(N,) whether the straight path start[i] -> end[i] ((N, 2) each) meets a segment of `polyline` (K, 2)."""
    a, b = _segments(polyline, closed=False)
    return _intersect(start[:, None], end[:, None], a[None], b[None]).any(1)


def inside_polygon(points: np.ndarray, polygon: np.ndarray) -> np.ndarray:
    """(N,) whether each point (N, 2) is inside `polygon` (K, 2) (even-odd rule; a point on an edge may go
    either way)."""
    x, y = points[:, :1], points[:, 1:]
    a, b = _segments(polygon, closed=True)
    (ax, ay), (bx, by) = a.T[:, None], b.T[:, None]  # (1, S) each
    straddles = (ay > y) != (by > y)
    at_x = ax + (y - ay) * (bx - ax) / np.where(by == ay, 1e-12, by - ay)
    return ((straddles & (x < at_x)).sum(1) % 2) == 1


def is_simple_polygon(polygon: np.ndarray) -> bool:
    """Whether no two non-adjacent edges of `polygon` (K >= 3, closed) meet."""
    a, b = _segments(polygon, closed=True)
    k = len(a)
    meet = _intersect(a[:, None], b[:, None], a[None], b[None])
    i, j = np.triu_indices(k, 1)
    adjacent = (j == i + 1) | ((i == 0) & (j == k - 1))
    return not meet[i[~adjacent], j[~adjacent]].any()


def _segments(points: np.ndarray, *, closed: bool) -> tuple[np.ndarray, np.ndarray]:
    ends = np.roll(points, -1, axis=0) if closed else points[1:]
    return (points, ends) if closed else (points[:-1], ends)


def _intersect(p, q, a, b) -> np.ndarray:
    """Whether segments p -> q and a -> b meet (broadcast over leading axes; touching counts)."""

    def orient(u, v, w):
        return np.sign(
            (v[..., 0] - u[..., 0]) * (w[..., 1] - u[..., 1]) - (v[..., 1] - u[..., 1]) * (w[..., 0] - u[..., 0])
        )

    o1, o2, o3, o4 = orient(p, q, a), orient(p, q, b), orient(a, b, p), orient(a, b, q)
    proper = (o1 * o2 <= 0) & (o3 * o4 <= 0)
    collinear = (o1 == 0) & (o2 == 0)
    overlap = collinear & _boxes_meet(p, q, a, b)
    return np.where(collinear, overlap, proper)


def _boxes_meet(p, q, a, b) -> np.ndarray:
    lo1, hi1 = np.minimum(p, q), np.maximum(p, q)
    lo2, hi2 = np.minimum(a, b), np.maximum(a, b)
    return ((lo1 <= hi2) & (lo2 <= hi1)).all(-1)

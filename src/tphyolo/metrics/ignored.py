"""The one rule for "this box lies in an ignored region", as the VisDrone toolkits apply it (dropObjectsInIgr.m).

Detection scoring (`metrics/visdrone.py`), tracking benchmarks (`metrics/track_protocols.py`) and the report's
matching (`report/matching.py`) all call `in_ignored_regions`:

- regions and boxes are rounded to whole pixels (half away from zero, as MATLAB's `round`) and clamped to
  >= 1; a region covers rows top..min(height, top + h) and columns left..min(width, left + w), 1-based
  inclusive, on an image-size mask;
- a box's covered area is read from the mask's integral image at its corners, which leaves out the box's
  first row and column, and divided by its full w * h; a box with >= half of its area covered lies in an
  ignored region.

Boxes are left, top, width, height (VisDrone's "xywh") in pixels.
"""

from __future__ import annotations

import numpy as np

IGNORE_OVERLAP = 0.5  # a box with this fraction of its area on the regions or more lies in them


def round_half_away(x: np.ndarray) -> np.ndarray:
    """MATLAB's `round`: halves go away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def covered_counts(regions: np.ndarray, rows: np.ndarray, cols: np.ndarray, *, height: int, width: int):
    """The ignored-region mask's integral image at 1-based (rows, cols): mask pixels in [1, r] x [1, c].

    `regions` (k, 4) are integer left, top, w, h; a region covers rows top..min(height, top + h) and columns
    left..min(width, left + w), 1-based inclusive. The mask is held compressed: its row and column ranges are
    cut at every region edge, so each cell of the coarse grid is wholly in or out of the mask.
    """
    r_lo, r_hi = regions[:, 1], np.minimum(height, regions[:, 1] + regions[:, 3])
    c_lo, c_hi = regions[:, 0], np.minimum(width, regions[:, 0] + regions[:, 2])

    def cuts(lo, hi, size):  # cell i spans [edges[i], edges[i + 1] - 1]
        return np.unique(np.clip(np.concatenate(([1, size + 1], lo, hi + 1)), 1, size + 1))

    row_edges, col_edges = cuts(r_lo, r_hi, height), cuts(c_lo, c_hi, width)
    row_in = (row_edges[None, :-1] >= r_lo[:, None]) & (row_edges[None, 1:] - 1 <= r_hi[:, None])  # (k, R)
    col_in = (col_edges[None, :-1] >= c_lo[:, None]) & (col_edges[None, 1:] - 1 <= c_hi[:, None])  # (k, C)
    coarse = (row_in[:, :, None] & col_in[:, None, :]).any(0).astype(np.float64)  # (R, C)

    def overlap(q, edges):  # (n, cells) pixels of each cell within [1, q]
        return np.clip(np.minimum(q[:, None], edges[None, 1:] - 1) - edges[None, :-1] + 1, 0, None)

    return np.einsum("qi,ij,qj->q", overlap(rows, row_edges), coarse, overlap(cols, col_edges))


def whole_pixel_regions(regions: np.ndarray) -> np.ndarray:
    """(k, 4) int64: the regions as the mask takes them (clamped to >= 1, then rounded)."""
    return round_half_away(np.maximum(1, np.asarray(regions, np.float64).reshape(-1, 4))).astype(np.int64)


def covered_fraction(
    boxes: np.ndarray, regions: np.ndarray, *, height: int | None = None, width: int | None = None
) -> np.ndarray:
    """(n,) the fraction of each xywh box's area on the mask of the xywh `regions` (see the module docstring).

    `height`, `width`: the image size; None (tracking files that do not give it) takes an image just large
    enough to hold every rounded box and region, so nothing is clipped. Sizes below one pixel count as one;
    0 for every box where there are no regions.
    """
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    regions = whole_pixel_regions(regions)
    if not len(regions) or not len(boxes):
        return np.zeros(len(boxes))
    pos = np.maximum(1, round_half_away(boxes)).astype(np.int64)
    if height is None or width is None:
        ends = np.concatenate([pos[:, :2] + pos[:, 2:], regions[:, :2] + regions[:, 2:]])
        width, height = (int(v) + 1 for v in ends.max(0))
    x, y = np.clip(pos[:, 0], 1, width), np.clip(pos[:, 1], 1, height)
    w, h = pos[:, 2], pos[:, 3]
    x2, y2 = np.minimum(width, x + w), np.maximum(1, np.minimum(height, y + h))
    corner_rows = np.concatenate([y, y2, y, y2])
    corner_cols = np.concatenate([x, x2, x2, x])
    tl, br, tr, bl = np.split(covered_counts(regions, corner_rows, corner_cols, height=height, width=width), 4)
    return (tl + br - tr - bl) / (h * w)


def in_ignored_regions(
    boxes: np.ndarray, regions: np.ndarray, *, height: int | None = None, width: int | None = None
) -> np.ndarray:
    """(n,) bool: which xywh `boxes` lie in the xywh ignored `regions` of their image (>= IGNORE_OVERLAP of
    their area on the regions' mask, the toolkit's rule; see `covered_fraction` for `height` and `width`)."""
    return ~(covered_fraction(boxes, regions, height=height, width=width) < IGNORE_OVERLAP)

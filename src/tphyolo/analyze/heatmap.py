"""Where tracks spend their time: occupancy on the ground, in the first frame's coordinates.

Each track seen in a frame adds one to the cell of its ground point (`tphyolo.analyze.points`): `cell` ground
pixels square, the grid's origin at the first frame's top-left corner. The grid covers the first frame and
grows (by whole cells) to take points the panning camera shows beyond it. `array` is the count grid
(float32, (rows, columns)) with `origin`, the ground pixel of its top-left corner; `overlay(first_frame)`
draws it over the first frame (or, without frames, over a plain canvas of the grid) as a colour image with its
colour scale.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from tphyolo.analyze.points import TrackPoints
from tphyolo.errors import InputError

COLOUR_MAP = cv2.COLORMAP_JET  # blue (few track-frames) to red (many)
SCALE_WIDTH = 64  # pixels of the colour scale beside the heat
SCALE_MIN_HEIGHT = 96  # an image lower than this is padded, for the scale's labels


class Heatmap:
    """Occupancy of ground cells (see the module docstring), for a first frame of `frame_size` (width, height)."""

    def __init__(self, frame_size: tuple[int, int], *, cell: int = 4) -> None:
        if cell < 1:
            raise InputError(f"cell must be >= 1 pixel, got {cell}")
        self.frame_size, self.cell = (int(frame_size[0]), int(frame_size[1])), int(cell)
        self.reset()

    def reset(self) -> None:
        """An empty grid over the first frame."""
        width, height = self.frame_size
        self._origin = np.zeros(2, np.int64)  # in cells
        self.array = np.zeros((-(-height // self.cell), -(-width // self.cell)), np.float32)

    @property
    def origin(self) -> tuple[int, int]:
        """The ground pixel (x, y) of the grid's top-left corner."""
        return int(self._origin[0] * self.cell), int(self._origin[1] * self.cell)

    def update(self, points: TrackPoints) -> None:
        """Add one frame's tracks."""
        if not len(points):
            return
        cells = np.floor(points.ground / self.cell).astype(np.int64)  # (N, 2) x, y
        self._grow(cells.min(0), cells.max(0))
        x, y = (cells - self._origin).T
        np.add.at(self.array, (y, x), 1.0)

    def _grow(self, low: np.ndarray, high: np.ndarray) -> None:
        rows, columns = self.array.shape
        before = np.maximum(self._origin - low, 0)  # x, y cells to add before
        after = np.maximum(high - (self._origin + [columns - 1, rows - 1]), 0)
        if before.any() or after.any():
            self.array = np.pad(self.array, ((before[1], after[1]), (before[0], after[0])))
            self._origin = self._origin - before

    def overlay(self, first_frame: np.ndarray | None = None, *, alpha: float = 0.6) -> np.ndarray:
        """uint8 BGR image of the grid's extent: the first frame in its place (grey elsewhere; a plain grey
        canvas without one), the occupancy over it in a colour scale (log-scaled, empty cells left clear), and
        that scale on the right, labelled in track-frames per cell."""
        rows, columns = self.array.shape
        canvas = np.full((rows * self.cell, columns * self.cell, 3), 96, np.uint8)
        if first_frame is not None:
            x0, y0 = -self._origin * self.cell
            height, width = first_frame.shape[:2]
            canvas[y0 : y0 + height, x0 : x0 + width] = first_frame[: canvas.shape[0] - y0, : canvas.shape[1] - x0]
        peak = float(self.array.max())
        heat = np.rint(255 * np.log1p(self.array) / max(np.log1p(peak), 1e-9)).astype(np.uint8)
        heat = cv2.resize(heat, (canvas.shape[1], canvas.shape[0]), interpolation=cv2.INTER_NEAREST)
        colour = cv2.applyColorMap(heat, COLOUR_MAP)
        mask = heat > 0
        canvas[mask] = (alpha * colour[mask] + (1 - alpha) * canvas[mask]).astype(np.uint8)
        if canvas.shape[0] < SCALE_MIN_HEIGHT:  # room for the scale's labels
            canvas = np.pad(canvas, ((0, SCALE_MIN_HEIGHT - canvas.shape[0]), (0, 0), (0, 0)), constant_values=96)
        return np.concatenate([canvas, colour_scale(canvas.shape[0], peak)], axis=1)


def colour_scale(height: int, peak: float) -> np.ndarray:
    """uint8 BGR (height, SCALE_WIDTH) panel: the heat's colour map from `peak` track-frames per cell (top) to
    one (bottom), on the log scale of `Heatmap.overlay`, with the counts of its ends and middle beside it."""
    peak = max(peak, 1.0)
    panel = np.full((height, SCALE_WIDTH, 3), 255, np.uint8)
    top, bottom, left = 18, height - 8, 6

    def level(value: float) -> float:  # the colour map's index of `value` track-frames, as in `overlay`
        return 255 * math.log1p(value) / math.log1p(peak)

    levels = np.linspace(255, level(1), bottom - top).round().astype(np.uint8)
    panel[top:bottom, left : left + 14] = cv2.applyColorMap(levels[:, None], COLOUR_MAP)
    cv2.putText(panel, "per cell", (2, 12), cv2.FONT_HERSHEY_SIMPLEX, 0.35, (0, 0, 0), 1, cv2.LINE_AA)
    span = 255 - level(1)  # 0 when the busiest cell holds one track-frame: one colour, one label
    for value in sorted({1, round(math.expm1(math.log1p(peak) / 2)), round(peak)}):
        y = top + (round((255 - level(value)) / span * (bottom - top - 1)) if span > 0 else 0)
        cv2.line(panel, (left + 14, y), (left + 18, y), (0, 0, 0), 1)
        cv2.putText(panel, str(value), (left + 20, y + 4), cv2.FONT_HERSHEY_SIMPLEX, 0.35, (0, 0, 0), 1, cv2.LINE_AA)
    return panel

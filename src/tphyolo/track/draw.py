"""Drawing tracks: boxes coloured and labelled by track id, and a short trail of where each track has been."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import cv2
import numpy as np

from tphyolo.predict.draw import class_colour, draw_boxes
from tphyolo.predict.draw_style import DEFAULT_STYLE, DrawStyle


class TrailPainter:
    """Draws the tracks of consecutive frames of one sequence: call `paint` frame by frame, `reset()` between
    sequences. A track's trail joins the centres of its boxes in the last `length` frames it was seen in."""

    def __init__(self, names: Sequence[str], *, length: int = 30, style: DrawStyle = DEFAULT_STYLE) -> None:
        self.names, self.length, self.style = tuple(names), length, style
        self.reset()

    def reset(self) -> None:
        self._trails: dict[int, deque[tuple[int, int]]] = {}
        self._last_seen: dict[int, int] = {}
        self._count = 0

    def paint(self, image: np.ndarray, boxes, ids, scores, labels) -> np.ndarray:
        """A copy of uint8 BGR `image` with the tracks seen in it ((M, 4) xyxy `boxes`, (M,) `ids`, `scores`,
        `labels`) drawn with their trails, as `style` says (`7 car 0.91`)."""
        self._count += 1
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        ids = np.asarray(ids).reshape(-1).astype(int).tolist()
        for track_id, (x1, y1, x2, y2) in zip(ids, boxes.tolist(), strict=True):
            trail = self._trails.setdefault(track_id, deque(maxlen=self.length))
            trail.append((round((x1 + x2) / 2), round((y1 + y2) / 2)))
            self._last_seen[track_id] = self._count
        for track_id in [t for t, seen in self._last_seen.items() if self._count - seen >= self.length]:
            del self._trails[track_id], self._last_seen[track_id]
        canvas = image.copy()
        thickness = self.style.line_width or max(1, round(sum(image.shape[:2]) / 1000))
        for track_id, trail in self._trails.items():
            if len(trail) > 1:
                points = np.array(trail, np.int32).reshape(-1, 1, 2)
                cv2.polylines(canvas, [points], False, class_colour(track_id), thickness, cv2.LINE_AA)
        return draw_boxes(canvas, boxes, labels, self.names, scores=None if self.style.hide_conf else scores,
                          labels=not self.style.hide_labels, line_width=self.style.line_width, ids=ids)  # fmt: skip

"""Counting tracks across lines, per line, class and direction.

A track's side of a line is read from its ground point (`tphyolo.analyze.points`) by the cross-product rule of
`tphyolo.analyze.geometry` (left: (B - A) x (p - A) < 0, x right and y down). Hysteresis: a side counts only
once the point is more than `margin` ground pixels from the line; inside that band the track keeps the side it
had. A crossing is a change of side whose path (from the last point on the old side to the first on the new
one) meets the line itself, not its extension: left -> right is `forward`, right -> left `backward`. Each track
is counted at most once per line, at its first crossing: a track that jitters on the line, or turns back over
it, counts once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tphyolo.analyze.events import Event, class_name
from tphyolo.analyze.geometry import paths_cross, signed_distances
from tphyolo.analyze.points import TrackPoints, TrackSlots, grown
from tphyolo.analyze.regions import Line

DIRECTIONS = ("forward", "backward")


class Counter:
    """Counts crossings of `lines` (Line objects, or (name, points) pairs) frame by frame: `update(points)` per
    frame returns that frame's crossings (Events); `counts` gives {line: {direction: {class name: n}}} so far and
    `events` every crossing. `names`: class names by id; `fps`: frames per second, for the events' times."""

    def __init__(self, lines: Sequence[Line | tuple], *, names=None, fps: float = 30.0, margin: float = 2.0) -> None:
        self.lines = [line if isinstance(line, Line) else Line(str(line[0]), np.asarray(line[1], float))
                      for line in lines]  # fmt: skip
        self.names, self.fps, self.margin = names, float(fps), float(margin)
        self.reset()

    def reset(self) -> None:
        """Forget every track and count."""
        self._slots = TrackSlots()
        k = len(self.lines)
        self._side = np.zeros((0, k), np.int8)  # last confirmed side per track and line: -1 left, 1 right, 0 none
        self._last = np.zeros((0, k, 2))  # where it was last seen on that side
        self._counted = np.zeros((0, k), dtype=bool)
        self.counts = {line.name: {d: {} for d in DIRECTIONS} for line in self.lines}
        self.events: list[Event] = []

    def update(self, points: TrackPoints) -> list[Event]:
        """Read one frame's tracks; returns the crossings they made in it."""
        rows = self._slots.rows(points.ids)
        size = len(self._slots)
        self._side, self._last = grown(self._side, size, 0), grown(self._last, size, 0.0)
        self._counted = grown(self._counted, size, False)
        found = []
        if not self.lines or not len(points):
            return found
        distance = signed_distances(points.ground, [line.points for line in self.lines])  # (N, L)
        now = np.where(distance > self.margin, 1, np.where(distance < -self.margin, -1, 0)).astype(np.int8)
        before = self._side[rows]
        flipped = (now != 0) & (before != 0) & (now != before) & ~self._counted[rows]
        for i, k in np.argwhere(flipped).tolist():  # rare: a change of side; does the path meet the line?
            line = self.lines[k]
            if not paths_cross(self._last[rows[i], k][None], points.ground[i][None], line.points)[0]:
                flipped[i, k] = False
                continue
            direction = "forward" if before[i, k] < 0 else "backward"
            label = class_name(self.names, points.labels[i])
            found.append(Event("crossing", line.name, int(points.ids[i]), label, points.number,
                               (points.number - 1) / self.fps, direction))  # fmt: skip
            per_class = self.counts[line.name][direction]
            per_class[label] = per_class.get(label, 0) + 1
        self._counted[rows] |= flipped
        sided = now != 0
        self._side[rows] = np.where(sided, now, before)
        self._last[rows] = np.where(sided[..., None], points.ground[:, None, :], self._last[rows])
        self.events.extend(found)
        return found

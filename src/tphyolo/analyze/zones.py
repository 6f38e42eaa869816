"""Occupancy of zones: per zone and class the live count, entries and exits, and each track's dwell time.

A track is inside a zone when its ground point is inside the polygon by more than `margin` ground pixels,
outside when it is outside by more than that; in the band between it keeps its state (a track first seen
there is outside). Outside -> inside is an entry (a track first seen inside enters in that frame), inside ->
outside an exit: a track that leaves and comes back enters twice. A visit lasts from the frame of its entry to
the last frame the track was seen inside, both counted: its dwell is that many frames over `fps`. A track not
seen in a frame (occluded, missed, out of the camera's view) keeps its state; the live count holds the tracks
inside, seen in the frame or not, by the class they were last seen as: entries - exits, whatever frame.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tphyolo.analyze.events import Event, class_name
from tphyolo.analyze.geometry import inside_polygon, signed_distance
from tphyolo.analyze.points import TrackPoints, TrackSlots, grown
from tphyolo.analyze.regions import Zone


class Zones:
    """Follows tracks in and out of `zones` (Zone objects, or (name, points) pairs): `update(points)` per frame
    returns its entries and exits (Events); `summary()` gives per zone the live count, entries and exits per
    class and the dwell of every track; `dwell(zone, track)` one track's dwell in seconds."""

    def __init__(self, zones: Sequence[Zone | tuple], *, names=None, fps: float = 30.0, margin: float = 2.0) -> None:
        self.zones = [zone if isinstance(zone, Zone) else Zone(str(zone[0]), np.asarray(zone[1], float))
                      for zone in zones]  # fmt: skip
        self.names, self.fps, self.margin = names, float(fps), float(margin)
        self.reset()

    def reset(self) -> None:
        """Forget every track and count."""
        self._slots = TrackSlots()
        k = len(self.zones)
        self._inside = np.zeros((0, k), dtype=bool)
        self._entered = np.zeros((0, k), np.int64)  # frame of the open visit's entry
        self._last_inside = np.zeros((0, k), np.int64)  # last frame seen inside
        self._frames = np.zeros((0, k), np.int64)  # frames of the closed visits
        self._labels = np.zeros(0, np.int64)  # the class each track was last seen as
        self.live = {zone.name: {} for zone in self.zones}
        self.entries = {zone.name: {} for zone in self.zones}
        self.exits = {zone.name: {} for zone in self.zones}
        self.events: list[Event] = []

    def update(self, points: TrackPoints) -> list[Event]:
        """Read one frame's tracks; returns the entries and exits in it."""
        rows = self._slots.rows(points.ids)
        size = len(self._slots)
        self._inside, self._entered = grown(self._inside, size, False), grown(self._entered, size, 0)
        self._last_inside, self._frames = grown(self._last_inside, size, 0), grown(self._frames, size, 0)
        self._labels = grown(self._labels, size, -1)
        self._labels[rows] = points.labels
        found = []
        for k, zone in enumerate(self.zones):
            inside = inside_polygon(points.ground, zone.points)
            before = self._inside[rows, k]
            now = before.copy()
            changing = np.flatnonzero(inside != before)  # few: the band is measured for these only
            if len(changing):
                clear = np.abs(signed_distance(points.ground[changing], zone.points, closed=True)) > self.margin
                now[changing[clear]] = inside[changing[clear]]
            for i in np.flatnonzero(now != before).tolist():
                kind, label = ("entry" if now[i] else "exit"), class_name(self.names, points.labels[i])
                found.append(Event(kind, zone.name, int(points.ids[i]), label, points.number,
                                   (points.number - 1) / self.fps))  # fmt: skip
                tally = self.entries if now[i] else self.exits
                tally[zone.name][label] = tally[zone.name].get(label, 0) + 1
            entering, leaving = rows[now & ~before], rows[~now & before]
            self._frames[leaving, k] += self._last_inside[leaving, k] - self._entered[leaving, k] + 1
            self._entered[entering, k] = points.number
            self._last_inside[rows[now], k] = points.number
            self._inside[rows, k] = now
            counts = np.bincount(self._labels[self._inside[:, k]] + 1)  # labels from -1 (no class)
            self.live[zone.name] = {class_name(self.names, label - 1): int(counts[label])
                                    for label in np.flatnonzero(counts).tolist()}  # fmt: skip
        self.events.extend(found)
        return found

    def dwell_frames(self, zone: str, track: int) -> int:
        """Frames track `track` spent in zone `zone` so far (its visits, the open one to its last frame inside)."""
        k = [z.name for z in self.zones].index(zone)
        row = self._slots.row(track)
        if row is None:
            return 0
        total = int(self._frames[row, k])
        if self._inside[row, k]:
            total += int(self._last_inside[row, k] - self._entered[row, k] + 1)
        return total

    def dwell(self, zone: str, track: int) -> float:
        """Seconds track `track` spent in zone `zone` so far."""
        return self.dwell_frames(zone, track) / self.fps

    def summary(self) -> dict:
        """{zone: {"live": {class: n}, "entries": {class: n}, "exits": {class: n}, "dwell_s": {track id: s}}}."""
        ids = self._slots.ids()
        out = {}
        for zone in self.zones:
            dwell = {int(i): round(self.dwell(zone.name, int(i)), 3) for i in ids.tolist()}
            out[zone.name] = {
                "live": self.live[zone.name],
                "entries": self.entries[zone.name],
                "exits": self.exits[zone.name],
                "dwell_s": {i: s for i, s in dwell.items() if s > 0},
            }
        return out

"""A synthetic-mot sequence seen by the analytics: its true tracks as per-frame streams, the true frame-to-frame
camera motion, and what the world knows (each object's ground path and speed) for the oracles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tphyolo.analyze.motion import GroundMotion
from tphyolo.analyze.points import TrackPoints
from tphyolo.data.builtin.synthetic_mot import FPS, WORLD_GSD, SimulatedSequence, simulate_sequence
from tphyolo.data.formats.visdrone import NAMES

SEED, LENGTH = (5, 0), 90


def simulate(*, draw: bool = False, length: int = LENGTH) -> SimulatedSequence:
    return simulate_sequence(np.random.default_rng(list(SEED)), length, draw=draw)


@dataclass(frozen=True)
class Truth:
    """The tracks the analytics read: untruncated rows of true objects (ids > 0, VisDrone classes 1-10)."""

    sequence: SimulatedSequence

    @property
    def rows(self):
        t = self.sequence.truth
        return t.select((t.ids > 0) & (t.classes >= 1) & (t.classes <= 10) & (t.truncation == 0))

    def motion(self, t: int) -> np.ndarray:
        """The true (2, 3) camera motion from frame t - 1 to frame t (from 0; identity for 0)."""
        if t == 0:
            return np.eye(3)[:2]
        camera = self.sequence.camera
        now, before = (np.vstack([camera.affine(i), [0, 0, 1]]) for i in (t, t - 1))
        return (now @ np.linalg.inv(before))[:2]

    def zoom(self, t: int) -> float:
        return float(self.sequence.camera.zoom[t])

    def gsd(self, t: int) -> float:
        """Metres per pixel of frame t (from 0)."""
        return WORLD_GSD / self.zoom(t)

    def points(self, *, compensate: bool = True, motions=None):
        """(frame index from 0, TrackPoints) per frame, ground through the true motion (or `motions`[t], or
        none)."""
        ground = GroundMotion()
        rows = self.rows
        for t in range(len(self.sequence.camera.zoom)):
            motion = motions[t] if motions is not None else self.motion(t)
            ground.advance(motion if compensate else None)
            now = rows.select(rows.frames == t + 1)
            yield t, TrackPoints.from_boxes(t + 1, now.boxes, now.ids, now.classes - 1, ground)

    def world_centre(self, track: int, t: int) -> np.ndarray:
        """(2,) world centre of object `track` in frame t, as the generator places it (whole pixels)."""
        box = self.sequence.world_boxes[track - 1]
        shift = np.round(self.sequence.velocity[track - 1] * t)
        return (box[:2] + box[2:]) / 2 + shift

    def ground_path(self, track: int, t) -> np.ndarray:
        """(T, 2) ground (first-frame) positions of object `track` at times t (no rounding: the straight path)."""
        box = self.sequence.world_boxes[track - 1]
        world = (box[:2] + box[2:]) / 2 + np.outer(np.asarray(t, float), self.sequence.velocity[track - 1])
        affine = self.sequence.camera.affine(0)
        return world @ affine[:, :2].T + affine[:, 2]

    def speed_kmh(self, track: int) -> float:
        return float(np.hypot(*self.sequence.velocity[track - 1]) * WORLD_GSD * FPS * 3.6)

    def name(self, track: int) -> str:
        rows = self.rows
        return NAMES[int(rows.classes[rows.ids == track][0]) - 1]

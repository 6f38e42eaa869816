"""A synthetic-mot sequence seen by the analytics: its true tracks as per-frame streams, the true frame-to-frame
camera motion, and what the world knows (each object's ground path and speed) for the oracles."""

from __future__ import annotations

from collections import Counter as Tally
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from tphyolo.analyze.motion import GroundMotion
from tphyolo.analyze.points import TrackPoints
from tphyolo.data.builtin.synthetic_mot import FPS, WORLD_GSD, SimulatedSequence, simulate_sequence
from tphyolo.data.files.image_io import write_image
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.data.mot.visdrone_mot import write_visdrone_mot

SEED, LENGTH = (5, 0), 90
H_LINE, V_LINE = 192.0, 320.0  # a horizontal and a vertical line through the first frame's centre
LINES = [("h", [[0, H_LINE], [640, H_LINE]]), ("v", [[V_LINE, 0], [V_LINE, 384]])]
MARGIN = 2.0


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


def record(truth: Truth, root: Path, *, zones=()) -> tuple[Path, Path, Path]:
    """Write the drawn sequence of `truth` under `root`: (folder of its track file seq.txt, folder of its frames
    frames/seq, lines yaml with LINES and `zones` (name, points))."""
    frames = root / "frames" / "seq"
    frames.mkdir(parents=True)
    for t, frame in enumerate(truth.sequence.frames, start=1):
        write_image(frames / f"{t:07d}.png", frame)
    write_visdrone_mot(root / "tracks" / "seq.txt", truth.rows)
    lines = root / "lines.yaml"
    lines.write_text(yaml.safe_dump({"lines": [{"name": n, "points": p} for n, p in LINES],
                                     "zones": [{"name": n, "points": p} for n, p in zones]}))  # fmt: skip
    return root / "tracks", root / "frames", lines


def observed(truth: Truth, track: int) -> np.ndarray:
    """Frame indices (from 0) where `track` is among the rows the analytics read."""
    rows = truth.rows
    return rows.frames[rows.ids == track] - 1


def expected_counts(truth: Truth) -> dict:
    """Counts of LINES: per line, direction and class, the tracks whose straight ground path, from where it is
    first seen to where it is last seen, goes from more than MARGIN on one side of the line to more than MARGIN
    on the other, within the line's extent (forward: left to right of the line's direction, i.e. down for h,
    left for v)."""
    counts = {"h": {"forward": Tally(), "backward": Tally()}, "v": {"forward": Tally(), "backward": Tally()}}
    for track in np.unique(truth.rows.ids).tolist():
        frames = observed(truth, track)
        (x0, y0), (x1, y1) = truth.ground_path(track, [frames[0], frames[-1]])
        for name, a, b, along, extent, at in (
            ("h", y0, y1, (x0, x1), 640, H_LINE),
            ("v", x0, x1, (y0, y1), 384, V_LINE),
        ):
            if min(a, b) < at - MARGIN and at + MARGIN < max(a, b):
                where = along[0] + (along[1] - along[0]) * (at - a) / (b - a)
                if 0 <= where <= extent:
                    # h: (640, 0) x (p - A) = 640 (py - 192) > 0 below: down is forward; v: (0, 384): -384 (px - 320)
                    forward = b > a if name == "h" else b < a
                    counts[name]["forward" if forward else "backward"][truth.name(track)] += 1
    return {line: {d: dict(c) for d, c in per.items()} for line, per in counts.items()}

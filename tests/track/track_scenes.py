"""Hand-made scenes with known identities for the tracker tests: trajectories in, detections out, and the check
that every true object kept one track id."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from tphyolo.track.interface import MultiObjectTracker


@dataclass
class Frame:
    """One frame's detections: boxes (N, 4) xyxy, scores (N,), the true object of each (-1: a false positive),
    and optionally the image and the true camera motion from the previous frame."""

    boxes: list = field(default_factory=list)
    scores: list = field(default_factory=list)
    truth: list = field(default_factory=list)
    image: np.ndarray | None = None
    motion: np.ndarray | None = None

    def add(self, box, score: float = 0.9, truth: int = -1) -> None:
        self.boxes.append(box)
        self.scores.append(score)
        self.truth.append(truth)


def box_at(cx: float, cy: float, size: float = 20.0) -> list[float]:
    return [cx - size / 2, cy - size / 2, cx + size / 2, cy + size / 2]


def crossing_scene() -> list[Frame]:
    """A moves right, B moves left 4 px lower; they meet at frame 30, where B is hidden behind A for 5 frames."""
    frames = []
    for t in range(60):
        frame = Frame()
        frame.add(box_at(20 + 4 * t, 100), 0.9, truth=0)
        if not 28 <= t <= 32:
            frame.add(box_at(260 - 4 * t, 104), 0.85, truth=1)
        frames.append(frame)
    return frames


def run(tracker: MultiObjectTracker, frames: list[Frame], *, give_motion: bool = False) -> dict[int, list[int]]:
    """The track ids each true object was given, frame by frame (objects never output are absent)."""
    ids: dict[int, list[int]] = defaultdict(list)
    for frame in frames:
        out = tracker.update(np.array(frame.boxes).reshape(-1, 4), np.array(frame.scores), frame=frame.image,
                             camera_motion=frame.motion if give_motion else None)  # fmt: skip
        for det, track_id in zip(out.detections.tolist(), out.ids.tolist(), strict=True):
            ids[frame.truth[det]].append(track_id)
    return dict(ids)


def identity_switches(ids: dict[int, list[int]]) -> int:
    """How often an object's track id changed, plus the ids shared by two objects."""
    changes = sum(int(np.count_nonzero(np.diff(seq))) for truth, seq in ids.items() if truth >= 0)
    owners = defaultdict(set)
    for truth, seq in ids.items():
        for track_id in seq:
            owners[track_id].add(truth)
    return changes + sum(len(o) - 1 for o in owners.values())

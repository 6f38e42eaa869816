"""One frame of a track stream as the analytics read it: each track's anchor point on the image and on the
ground (`tphyolo.analyze.motion`), with its id and class.

    ground = GroundMotion()
    for number, frame in enumerate(frames, start=1):
        tracks = tracker.update(boxes, scores, labels, frame=frame)
        ground.advance(tracker.camera_motion)
        points = TrackPoints.from_boxes(number, tracks.boxes, tracks.ids, tracks.labels, ground)
        counter.update(points); zones.update(points); speed.update(points); heatmap.update(points)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tphyolo.analyze.motion import GroundMotion
from tphyolo.errors import InputError

ANCHORS = ("centre", "bottom")


def anchor_points(boxes: np.ndarray, anchor: str = "centre") -> np.ndarray:
    """(N, 2) the point of each box (N, 4) xyxy a track stands for: its centre, or the middle of its bottom edge
    (`bottom`: where a person or a vehicle filmed at an angle touches the ground)."""
    if anchor not in ANCHORS:
        raise InputError(f"unknown anchor {anchor!r}; known: {list(ANCHORS)}")
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    y = (boxes[:, 1] + boxes[:, 3]) / 2 if anchor == "centre" else boxes[:, 3]
    return np.stack([(boxes[:, 0] + boxes[:, 2]) / 2, y], axis=1)


@dataclass(frozen=True)
class TrackPoints:
    """The tracks of frame `number` (from 1): `ids` (N,) int64, `labels` (N,) int64 class ids, `image` (N, 2)
    anchor points in the frame's pixels, `ground` (N, 2) the same in ground (first-frame) pixels, and `scale`,
    frame pixels per ground pixel."""

    number: int
    ids: np.ndarray
    labels: np.ndarray
    image: np.ndarray
    ground: np.ndarray
    scale: float = 1.0

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def from_boxes(cls, number: int, boxes, ids, labels, ground: GroundMotion | None = None, *,
                   anchor: str = "centre") -> TrackPoints:  # fmt: skip
        """The points of boxes (N, 4) xyxy in frame pixels; `ground` (already advanced to this frame) maps them
        onto the ground (None: a still camera)."""
        image = anchor_points(boxes, anchor)
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        if not len(ids) == len(labels) == len(image):
            raise InputError(f"{len(image)} boxes, {len(ids)} ids and {len(labels)} labels")
        if ground is None:
            return cls(number, ids, labels, image, image.copy())
        return cls(number, ids, labels, image, ground.to_ground(image), ground.scale)


class TrackSlots:
    """Rows of per-track state arrays, one per track id, allocated on first sight."""

    def __init__(self) -> None:
        self._slot: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._slot)

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """(N,) the row of each id, new ids getting the next free rows in order."""
        return np.array([self._slot.setdefault(int(i), len(self._slot)) for i in ids.tolist()], dtype=np.int64)

    def row(self, track: int) -> int | None:
        """The row of id `track`, None when it was never seen."""
        return self._slot.get(int(track))

    def ids(self) -> np.ndarray:
        """(len,) the id of each row."""
        out = np.zeros(len(self._slot), np.int64)
        out[list(self._slot.values())] = list(self._slot.keys())
        return out


def grown(array: np.ndarray, size: int, fill) -> np.ndarray:
    """`array` extended along its first axis to at least `size` rows of `fill` (unchanged when long enough)."""
    if len(array) >= size:
        return array
    extra = np.full((max(size, 2 * len(array)) - len(array), *array.shape[1:]), fill, dtype=array.dtype)
    return np.concatenate([array, extra])

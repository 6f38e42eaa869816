"""The boxes of one video sequence in memory, one row per box: ground truth, detections or tracker output.

Every MOT text format (`tphyolo.data.mot.FORMATS`) reads into a `TrackTable` and writes from one. Boxes are
xyxy pixels (the files store x, y, width, height; see `tphyolo.ops.boxes`); frames are numbered from 1.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import numpy as np

from tphyolo.errors import InputError

UNKNOWN = -1  # a column the file does not have, or an id a detection does not have


@dataclass(frozen=True)
class TrackTable:
    """N boxes of one sequence.

    frames (N,) int64 >= 1; ids (N,) int64, UNKNOWN for detections; boxes (N, 4) float64 xyxy pixels;
    scores (N,) float64 (confidence; in ground truth the "consider" flag, 1 evaluated, 0 ignored); classes (N,)
    int64, the file's own category number (VisDrone 0-11, MOTChallenge 1-13, UAVDT 1-3), UNKNOWN when the
    file has none; truncation and occlusion (N,) int64 levels, visibility (N,) float64 in [0, 1], each
    UNKNOWN where the file does not give it.
    """

    frames: np.ndarray
    ids: np.ndarray
    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray
    truncation: np.ndarray
    occlusion: np.ndarray
    visibility: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.frames)
        for f in fields(self):
            value = getattr(self, f.name)
            expected = (n, 4) if f.name == "boxes" else (n,)
            if value.shape != expected:
                raise InputError(f"TrackTable.{f.name}: shape {value.shape}, expected {expected}")

    @classmethod
    def from_columns(
        cls,
        frames,
        ids,
        boxes,
        scores=None,
        classes=None,
        *,
        truncation=None,
        occlusion=None,
        visibility=None,
    ) -> TrackTable:
        """A table from array-likes (`boxes` (N, 4) xyxy); a column left out is UNKNOWN (scores: 1)."""
        frames = np.asarray(frames, dtype=np.int64).reshape(-1)
        n = len(frames)

        def column(value, dtype, default):
            return np.full(n, default, dtype) if value is None else np.asarray(value, dtype=dtype).reshape(n)

        return cls(
            frames=frames,
            ids=column(ids, np.int64, UNKNOWN),
            boxes=np.asarray(boxes, dtype=np.float64).reshape(n, 4),
            scores=column(scores, np.float64, 1.0),
            classes=column(classes, np.int64, UNKNOWN),
            truncation=column(truncation, np.int64, UNKNOWN),
            occlusion=column(occlusion, np.int64, UNKNOWN),
            visibility=column(visibility, np.float64, UNKNOWN),
        )

    @classmethod
    def empty(cls) -> TrackTable:
        return cls.from_columns(np.zeros(0), None, np.zeros((0, 4)))

    @classmethod
    def concatenate(cls, tables: Sequence[TrackTable]) -> TrackTable:
        if not tables:
            return cls.empty()
        return cls(**{f.name: np.concatenate([getattr(t, f.name) for t in tables]) for f in fields(cls)})

    def __len__(self) -> int:
        return len(self.frames)

    def select(self, rows) -> TrackTable:
        """The rows `rows` (a boolean mask or indices), in that order."""
        return TrackTable(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})

    @property
    def last_frame(self) -> int:
        """The highest frame number (0 for an empty table)."""
        return int(self.frames.max()) if len(self) else 0

    def by_frame(self) -> Iterator[tuple[int, TrackTable]]:
        """(frame, its rows) for every frame that has rows, ascending; rows keep their order within a frame."""
        if not len(self):
            return
        order = np.argsort(self.frames, kind="stable")
        frames = self.frames[order]
        starts = np.flatnonzero(np.r_[True, frames[1:] != frames[:-1]])
        ends = np.r_[starts[1:], len(frames)]
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            yield int(frames[start]), self.select(order[start:end])

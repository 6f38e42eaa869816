"""The live tracks of a tracker as one table: a column per quantity, a row per track.

    tracks = LiveTracks(ids=np.zeros(0, np.int64), score=np.zeros(0))   # the columns, empty
    tracks.append({"ids": np.array([0]), "score": np.array([0.9])})    # one track more
    tracks.keep(tracks.score > 0.5)                                     # the rows that live on
    tracks.ids                                                          # a column, by its name

Each engine (ByteTrack/BoT-SORT's `tphyolo.track.tracker`, OC-SORT's `tphyolo.track.ocsort`) names its own
columns; a frame then costs a fixed number of vectorised steps on them whatever the number of tracks. A column
is a numpy array or a `KalmanStates` (anything indexed by rows with a `concatenate` of its own).

`SparseFrames` gives an engine that keeps its table in `tracks` and counts frames in `frame_count` the
`skip_empty` capability (`tphyolo.track.interface.SkipsEmptyFrames`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tphyolo.errors import InputError


class LiveTracks:
    """Parallel columns (row i of each is one track), given by name with their first rows (usually none);
    read and assigned as attributes. The first column's length is the number of tracks."""

    def __init__(self, **columns: Any) -> None:
        if not columns:
            raise InputError("LiveTracks needs at least one column")
        lengths = {name: len(value) for name, value in columns.items()}
        if len(set(lengths.values())) > 1:
            raise InputError(f"LiveTracks columns of different lengths: {lengths}")
        self._names = tuple(columns)
        for name, value in columns.items():
            setattr(self, name, value)

    def __len__(self) -> int:
        return len(getattr(self, self._names[0]))

    def keep(self, rows: np.ndarray) -> None:
        """Keep the rows `rows` (a boolean mask or indices), in that order, in every column."""
        for name in self._names:
            setattr(self, name, getattr(self, name)[rows])

    def append(self, rows: Mapping[str, Any]) -> None:
        """Add tracks at the end: `rows` gives every column's new rows by name."""
        if set(rows) != set(self._names):
            raise InputError(f"LiveTracks.append needs the columns {sorted(self._names)}, got {sorted(rows)}")
        for name in self._names:
            mine = getattr(self, name)
            joined = np.concatenate([mine, rows[name]]) if isinstance(mine, np.ndarray) else type(mine).concatenate(
                [mine, rows[name]])  # fmt: skip
            setattr(self, name, joined)


class SparseFrames:
    """The `skip_empty` of an engine whose live tracks are `self.tracks` and whose frame count is
    `self.frame_count`."""

    tracks: LiveTracks
    frame_count: int

    def skip_empty(self, frames: int) -> None:
        """Advance `frames` frames that have no detection (and no image) at once, which only moves the frame count
        while no track is kept. ValueError when a track is kept (its age must move frame by frame)."""
        if len(self.tracks) or frames < 0:
            raise InputError(f"skip_empty({frames}) with {len(self.tracks)} track(s) kept; update frame by frame")
        self.frame_count += frames

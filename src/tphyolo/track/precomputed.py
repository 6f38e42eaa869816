"""Tracking precomputed detections ("public detections", as the MOT benchmarks hand them out): no model runs.

    for number, image, tracks in track_detections(read_detections(path), make_tracker("bytetrack")):
        ...

A sequence's detections are a `TrackTable` (`tphyolo.data.mot.sequences.read_detections`: MOTChallenge or
VisDrone-MOT rows); the tracker's labels are their category column (-1 where the file gives none). With the
sequence's frames (frame number, uint8 BGR image), each frame's image is handed to the tracker (for its
camera-motion compensation) and to the caller (for drawing); detections of frames that have no image are then
left out. Without frames, every frame from 1 to the last one with a detection is tracked, none skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from tphyolo.data.mot.table import TrackTable
from tphyolo.track.interface import MultiObjectTracker, Tracks


def track_detections(
    detections: TrackTable, tracker: MultiObjectTracker, *, frames: Iterable[tuple[int, np.ndarray]] | None = None
) -> Iterator[tuple[int, np.ndarray | None, Tracks]]:
    """(frame number, image or None, tracks seen) for each frame of one sequence, from a reset tracker (see the
    module docstring). `frames` come in ascending number."""
    tracker.reset()
    by_frame = dict(detections.by_frame())
    if frames is None:
        frames = ((number, None) for number in range(1, detections.last_frame + 1))
    for number, image in frames:
        rows = by_frame.get(number, TrackTable.empty())
        yield number, image, tracker.update(rows.boxes, rows.scores, rows.classes, frame=image)

"""Tracking precomputed detections ("public detections", as the MOT benchmarks hand them out): no model runs.

    for number, image, tracks in track_detections(read_detections(path), make_tracker("bytetrack")):
        ...

A sequence's detections are a `TrackTable` (`tphyolo.data.mot.sequences.read_detections`: MOTChallenge or
VisDrone-MOT rows); the tracker's labels are their category column (-1 where the file gives none). With the
sequence's frames (frame number, uint8 BGR image), each frame's image is handed to the tracker (for its
camera-motion compensation) and to the caller (for drawing); detections of frames that have no image are then
left out. Without frames, the frames from 1 to the last one with a detection are tracked sparsely: each frame
with a detection, and the empty frames after it while a track is kept; an empty stretch with no track kept is
passed in one step by trackers that offer `skip_empty(frames)` (`tphyolo.track.interface.SkipsEmptyFrames`:
ByteTrack, BoT-SORT, OC-SORT), which gives the same tracks as visiting it, so that a frame number of 10^9 costs
no more than a small one; a tracker without it visits every frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from tphyolo.data.mot.table import TrackTable
from tphyolo.track.interface import MultiObjectTracker, SkipsEmptyFrames, Tracks


def track_detections(
    detections: TrackTable, tracker: MultiObjectTracker, *, frames: Iterable[tuple[int, np.ndarray]] | None = None
) -> Iterator[tuple[int, np.ndarray | None, Tracks]]:
    """(frame number, image or None, tracks seen) for each frame of one sequence, from a reset tracker (see the
    module docstring). `frames` come in ascending number."""
    tracker.reset()
    by_frame = dict(detections.by_frame())
    if frames is None:
        frames = ((number, None) for number in _visited_frames(sorted(by_frame), tracker))
    for number, image in frames:
        rows = by_frame.get(number, TrackTable.empty())
        yield number, image, tracker.update(rows.boxes, rows.scores, rows.classes, frame=image)


def _visited_frames(numbers: list[int], tracker: MultiObjectTracker) -> Iterator[int]:
    """The frames to update `tracker` with, up to the last of `numbers` (the frames with detections, ascending),
    read lazily: between two of them, the empty frames while the tracker keeps a track, the rest skipped."""
    sparse = isinstance(tracker, SkipsEmptyFrames)
    last = 0
    for number in numbers:
        for empty in range(last + 1, number):
            if sparse and not len(tracker.tracks):
                tracker.skip_empty(number - empty)
                break
            yield empty
        yield number
        last = number

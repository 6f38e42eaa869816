"""Track streams for the analytics, one per video sequence, from whichever input a run has:

- `detector_streams`: a detector (`tphyolo.predict.Predictor`) and a tracker over videos or frame folders;
- `detection_streams`: detection files of an earlier run (MOT or VisDrone-MOT rows) through a tracker;
- `track_streams`: track files of an earlier `track` run, or ground truth (MOT or VisDrone-MOT rows with ids):
  nothing is detected or tracked again.

Every stream yields `StreamFrame`s in order with the camera motion from the previous frame: the tracker's own
estimate when it compensates camera motion (`tphyolo.track.interface.CompensatesCameraMotion`: BoT-SORT, or
ByteTrack with `cmc`), else
one estimated with `cmc` from the frames when there are frames and `cmc` is not "none" (OC-SORT, track files),
else the identity: a still camera. Detection files' categories are VisDrone's, read as `tphyolo.Tracker` reads
them (`tphyolo.track.stream.class_ids`); track files' categories go through the table of their folder
(`tphyolo.data.categories`): the `categories.yaml` a `track` run writes beside them, else that of their layout
(`tphyolo.data.mot.sequences.track_files`: UAVDT ground truth 1 car, 2 truck, 3 bus; MOTChallenge's; else
VisDrone-DET's). Files pair with the source's sequences as there (`pair_sequences`); rows of track files without
an id (ignored regions) and of a category the table lacks (VisDrone's "others", 11, not scored) are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tphyolo.data.categories import NONE, TRACKING_TABLES, CategoryTable, read_table
from tphyolo.data.mot.sequences import track_files
from tphyolo.data.mot.table import TrackTable
from tphyolo.predict.sequences import VideoSequence, resolve_sequences
from tphyolo.predict.sources import iter_frames
from tphyolo.track.cmc import IDENTITY, CameraMotion
from tphyolo.track.interface import MultiObjectTracker, SequenceDetector, compensates_camera_motion
from tphyolo.track.stream import TrackedFrame, Tracker, pair_sequences


@dataclass(frozen=True)
class StreamFrame:
    """One frame: `number` (from 1), `image` (uint8 BGR, None without frames), `fps` (None when unknown),
    tracks `boxes` (M, 4) xyxy pixels, `ids` (M,), `labels` (M,) class ids (-1: none), and `motion` (2, 3) the
    camera motion from the previous frame's pixels to this frame's."""

    number: int
    image: np.ndarray | None
    fps: float | None
    boxes: np.ndarray
    ids: np.ndarray
    labels: np.ndarray
    motion: np.ndarray


@dataclass(frozen=True)
class TrackStream:
    """One sequence: its `name`, class `names` by id, and its `frames` (an iterator, read once)."""

    name: str
    names: tuple[str, ...]
    frames: Iterator[StreamFrame]


class FrameMotion:
    """The camera motion of each frame of one stream, after `tracker` has seen it: the tracker's own estimate
    when it compensates camera motion, else one estimated with `cmc` from the image (identity without one)."""

    def __init__(self, tracker: MultiObjectTracker | None, cmc: str) -> None:
        self.tracker = tracker if compensates_camera_motion(tracker) else None
        self.camera = CameraMotion(cmc)

    def __call__(self, image: np.ndarray | None, boxes: np.ndarray) -> np.ndarray:
        if self.tracker is not None:
            return np.array(self.tracker.camera_motion, dtype=np.float64)
        return IDENTITY.copy() if image is None else self.camera(image, boxes)


def detector_streams(predictor: SequenceDetector, tracker: MultiObjectTracker, source, *,
                     cmc: str = "sparse") -> Iterator[TrackStream]:  # fmt: skip
    """Streams of `predictor` detections tracked by `tracker` over each sequence of `source`."""
    names = tuple(predictor.names)

    def frames(sequence: VideoSequence) -> Iterator[StreamFrame]:
        motion = FrameMotion(tracker, cmc)
        for frame, result in predictor.track_sequence(sequence, tracker):
            boxes = result.boxes.numpy()
            yield StreamFrame(result.frame, frame.image, frame.fps, boxes, result.ids.numpy(),
                              result.labels.numpy(), motion(frame.image, boxes))  # fmt: skip

    for sequence in resolve_sequences(source):
        yield TrackStream(sequence.name, names, frames(sequence))


def detection_streams(folder: Path, tracker: MultiObjectTracker, source=None, *,
                      cmc: str = "sparse") -> Iterator[TrackStream]:  # fmt: skip
    """Streams of the detection files in `folder` (`<seq>.txt`) tracked by `tracker` (through `tphyolo.Tracker`),
    with the frames of the sequence of the same name in `source` when given (needed for the tracker's
    camera-motion compensation)."""
    tracking = Tracker(detections=folder, tracker=tracker)
    for name, frames in tracking.sequences(source):
        yield TrackStream(name, tuple(tracking.names), _tracked_frames(frames, tracker, cmc))


def _tracked_frames(frames: Iterator[TrackedFrame], tracker: MultiObjectTracker, cmc: str) -> Iterator[StreamFrame]:
    motion = FrameMotion(tracker, cmc)
    for frame in frames:
        yield StreamFrame(frame.number, frame.image, frame.fps, frame.boxes, frame.ids, frame.labels,
                          motion(frame.image, frame.boxes))  # fmt: skip


def track_streams(folder: Path, source=None, *, cmc: str = "sparse") -> Iterator[TrackStream]:
    """Streams of the track files in `folder` (`<seq>.txt`, rows with ids; or one such file), the camera motion
    estimated with `cmc` from the frames of the sequence of the same name in `source` when given."""
    files, read, fmt = track_files(folder)
    categories = read_table(folder if folder.is_dir() else folder.parent) or TRACKING_TABLES[fmt]
    for name, (path, sequence) in pair_sequences(files, source).items():
        table = read(path)
        known = (categories.classes(table.classes) != NONE) | (table.classes <= 0)  # 0, -1: region, no class
        table = table.select((table.ids > 0) & known)
        yield TrackStream(name, categories.names, _table_frames(table, sequence, cmc, categories))


def _table_frames(table: TrackTable, sequence: VideoSequence | None, cmc: str,
                  categories: CategoryTable) -> Iterator[StreamFrame]:  # fmt: skip
    by_frame = dict(table.by_frame())
    motion = FrameMotion(None, cmc)
    if sequence is None:
        numbered = ((number, None, None) for number in range(1, table.last_frame + 1))
    else:
        numbered = _images(sequence)
    for number, image, fps in numbered:
        rows = by_frame.get(number, TrackTable.empty())
        labels = categories.classes(rows.classes)
        yield StreamFrame(number, image, fps, rows.boxes, rows.ids, labels, motion(image, rows.boxes))


def _images(sequence: VideoSequence) -> Iterator[tuple[int, np.ndarray, float | None]]:
    for position, frame in enumerate(iter_frames(list(sequence.files))):
        yield sequence.frame_number(frame, position), frame.image, frame.fps

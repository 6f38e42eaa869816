"""What every multi-object tracker is: made from its settings, fed one frame's detections at a time, answering
with the tracks seen in that frame.

    tracker = make_tracker("ocsort")          # tphyolo.track.registry: a name, a yaml file or a settings object
    for boxes, scores, labels, image in frames:
        tracks = tracker.update(boxes, scores, labels, frame=image)
        tracks.ids, tracks.boxes

This is the contract that MOT codebases share (SORT and its descendants, BoxMOT's trackers): the tracker keeps
its state between calls, `reset()` starts a new stream, and nothing but the detections (and, for trackers that
compensate camera motion, the frame) goes in. A new tracker is a class keeping this contract, a settings
dataclass with a `tracker` field naming it, and one row of `tphyolo.track.registry.TRACKERS`; the command line,
`Predictor.track`, the writers and the benchmarks take it from there.

Beside the contract, optional capabilities, each a protocol of its own that callers check with `isinstance`
(any class with the members has it, no registration needed):

- `SkipsEmptyFrames`: `tracks` (its live tracks, `len` = how many) and `skip_empty(frames)`, passing empty frames
  in one step while no track is kept (precomputed detections with frame numbers far apart);
- `CompensatesCameraMotion`: `camera_motion`, the (2, 3) affine the last `update` applied, which the analytics
  follow the ground with (`tphyolo.analyze`), when its settings' camera-motion compensation is on;
- `CameraMotionSettings`: settings with a `cmc` field, the compensation method ("none": off);
- `SequenceDetector`: a detector that tracks one video sequence (`tphyolo.predict.Predictor.track_sequence`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tphyolo.errors import InputError


@dataclass(frozen=True)
class Tracks:
    """The tracks seen in one frame: `boxes` (M, 4) float64 xyxy pixels (each tracker's docstring says whether
    it reports its filtered box or the detection's), `ids` (M,) int64 >= 1, stable across the stream, `scores`
    (M,) and `labels` (M,) int64 of the detection each was matched with, and `detections` (M,) int64, that
    detection's index in the frame's input; ordered by id."""

    boxes: np.ndarray
    ids: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    detections: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


@runtime_checkable
class MultiObjectTracker(Protocol):
    """A tracker (see the module docstring).

    config: its settings, a frozen dataclass whose `tracker` field is its name in the registry.
    reset(): forget every track and start a new stream (ids start again at 1).
    update(boxes (N, 4) xyxy pixels, scores (N,), labels (N,) or None, *, frame: uint8 BGR image or None,
      camera_motion: (2, 3) affine from the previous frame's pixels to this frame's, or None) -> Tracks: advance
      one frame. Arrays may be numpy arrays, tensors or lists. A tracker that does not use the frame or the
      camera motion ignores them.
    """

    config: Any

    def reset(self) -> None: ...

    def update(
        self,
        boxes: Any,
        scores: Any,
        labels: Any = None,
        *,
        frame: np.ndarray | None = None,
        camera_motion: np.ndarray | None = None,
    ) -> Tracks: ...


@runtime_checkable
class SkipsEmptyFrames(Protocol):
    """A tracker that passes a stretch of empty frames in one step: `tracks`, its live tracks (`len`: how many);
    `skip_empty(frames)` advances `frames` frames without detections at once, giving the same tracks as
    `update` on each, and raises ValueError while a track is kept."""

    tracks: Sized

    def skip_empty(self, frames: int) -> None: ...


@runtime_checkable
class CameraMotionSettings(Protocol):
    """Tracker settings with camera-motion compensation: `cmc`, its method ("none": off)."""

    cmc: str


@runtime_checkable
class CompensatesCameraMotion(Protocol):
    """A tracker that estimates the camera's motion: `camera_motion`, the (2, 3) affine from the previous frame's
    pixels to this frame's that its last `update` applied."""

    camera_motion: np.ndarray


@runtime_checkable
class SequenceDetector(Protocol):
    """A detector that tracks video sequences (`tphyolo.predict.Predictor`): `names`, its class names by id;
    `track_sequence(sequence, tracker, *, on_skip, vid_stride)` yields (frame, tracked Results) per frame of one
    sequence, from a reset tracker."""

    names: Any

    def track_sequence(self, sequence: Any, tracker: Any, *, on_skip: Any = None, vid_stride: int = 1
                       ) -> Iterator[tuple[Any, Any]]: ...  # fmt: skip


def camera_compensation(tracker: MultiObjectTracker) -> str:
    """The camera-motion compensation method of `tracker`'s settings ("none" for settings without one)."""
    return tracker.config.cmc if isinstance(tracker.config, CameraMotionSettings) else "none"


def compensates_camera_motion(tracker: MultiObjectTracker | None) -> bool:
    """Whether `tracker` reports the camera motion it applied (`CompensatesCameraMotion`) with its compensation
    on: settings without `cmc` count as on, since the tracker offers the motion."""
    if tracker is None or not isinstance(tracker, CompensatesCameraMotion):
        return False
    return not isinstance(tracker.config, CameraMotionSettings) or tracker.config.cmc != "none"


def detections_of_frame(boxes: Any, scores: Any, labels: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One frame's input as float64 (N, 4) boxes, float64 (N,) scores and int64 (N,) labels (0 when None);
    ValueError when their lengths differ."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    labels = np.zeros(len(boxes), np.int64) if labels is None else np.asarray(labels).astype(np.int64).reshape(-1)
    if not len(boxes) == len(scores) == len(labels):
        raise InputError(f"{len(boxes)} boxes, {len(scores)} scores and {len(labels)} labels")
    return boxes, scores, labels

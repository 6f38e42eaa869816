"""Tracking whole sources: a detector (or precomputed detections) and a tracker over every video sequence.

    for result in Tracker("best.pt", tracker="botsort")("drone.mp4"):
        result.ids, result.boxes    # (M,) track ids >= 1, (M, 4) xyxy pixels of the frame
        result.frame                # the frame's number in its sequence, from 1 (as in the MOT files)

A source is cut into sequences as `tphyolo.predict.sequences.resolve_sequences` does (a video, a folder of
frames, a folder of sequence folders, ...) and the tracker starts afresh at each. With `detections=` (a folder
of per-sequence MOT or VisDrone-MOT files, `tphyolo.data.mot.sequences.detection_files`) no model runs: the
files' sequences are tracked, with the frames of the source's sequence of the same name when a source is given
(a single sequence pairs with a single file whatever their names); their category column gives the class, by
VisDrone's table (`class_ids`), and is kept as it is for the files written. `pair_sequences` and `class_ids` are
the rules any reader of such files follows (`tphyolo.analyze` reads them through both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tphyolo.data.categories import VISDRONE
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.data.mot.sequences import detection_files, read_detections
from tphyolo.errors import InputError
from tphyolo.predict import predictor as prediction
from tphyolo.predict.results import Results
from tphyolo.predict.sequences import VideoSequence, resolve_sequences
from tphyolo.predict.sources import Stream, iter_frames
from tphyolo.track.interface import MultiObjectTracker, SequenceDetector, camera_compensation
from tphyolo.track.job import DEFAULT_TRACKER, TRACK_CONF
from tphyolo.track.precomputed import track_detections
from tphyolo.track.registry import make_tracker

SkipHandler = Callable[[Path | Stream, Exception], None]

def class_ids(categories: np.ndarray) -> np.ndarray:
    """The class id (into VisDrone's `NAMES`) of each category of a file's category column, by VisDrone-DET's
    category table (`tphyolo.data.categories.VISDRONE`); -1 for a category that is no class (0 ignored regions,
    11 others, -1 none)."""
    return VISDRONE.classes(categories)


def pair_sequences(files: dict[str, Path], source: Any) -> dict[str, tuple[Path, VideoSequence | None]]:
    """Name -> (file, the sequence of `source` of the same name, or None without a source) for each of `files`
    (per-sequence text files); a single file and a single sequence pair whatever their names. Raises
    FileNotFoundError naming a file whose sequence `source` lacks."""
    sequences = {s.name: s for s in resolve_sequences(source)} if source is not None else {}
    if len(files) == 1 and len(sequences) == 1:
        sequences = {next(iter(files)): next(iter(sequences.values()))}
    missing = [name for name in files if sequences and name not in sequences]
    if missing:
        raise FileNotFoundError(f"source {source}: no sequence named {missing[0]!r} for {files[missing[0]]}")
    return {name: (path, sequences.get(name)) for name, path in files.items()}


@dataclass(frozen=True)
class TrackedFrame:
    """One frame's tracks: `number` (from 1), `image` (None without frames), `path` (its file, a stream's text,
    or None), `image_name` (its file name; None for a video frame), `fps` (None for image frames), the tracks'
    `boxes` (M, 4) xyxy, `ids`, `scores`, `labels` (class ids, -1 for none) and `categories` (the category column
    of precomputed detections; None: derived from the class ids by the writer)."""

    number: int
    image: np.ndarray | None
    path: Path | str | None
    image_name: str | None
    fps: float | None
    boxes: np.ndarray
    ids: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    categories: np.ndarray | None = None

    def results(self, names: tuple[str, ...]) -> Results:
        """This frame as `Results` with track ids (sorted by score, as any Results), `frame` = number."""
        shape = (0, 0) if self.image is None else self.image.shape[:2]
        empty = Results(torch.zeros((0, 4)), torch.zeros(0), torch.zeros(0, dtype=torch.int64), names=names,
                        path=self.path, shape=shape, frame=self.number, image=self.image)  # fmt: skip
        return empty.tracked(self.boxes, self.ids, self.scores, self.labels)


class Tracker:
    """Detects and tracks objects through the video sequences of a source (see the module docstring).

    weights: checkpoint path(s) or exported model(s), as `Predictor` takes them, or a `Predictor` to use; None
    with `detections`. tracker: a registered name (`tphyolo.track.registry.TRACKERS`), a yaml of settings over
    one, a settings object, or a tracker keeping `MultiObjectTracker`'s contract; `cmc` overrides its
    camera-motion compensation. detections: a folder of precomputed detection files instead of a detector.
    The other keywords go to `Predictor` (`config`, `runtime`, `device`, `slice`, `classifier`, `imgsz=...`);
    the detector's `conf` defaults to TRACK_CONF (0.1: ByteTrack's second association uses weak detections).

    Calling it on a source yields one `Results` per frame, holding the tracks seen: `ids` (M,) int64 track ids,
    the tracker's `boxes`, `scores`, `labels`, `frame` (its number in its sequence from 1, as the MOT files
    and TrackEval number it) and the image.
    `sequences(source)` yields (sequence name, its `TrackedFrame`s) for writers.
    """

    def __init__(
        self,
        weights: Any = None,
        tracker: Any = DEFAULT_TRACKER,
        *,
        detections: str | Path | None = None,
        cmc: str | None = None,
        **predictor_settings: Any,
    ) -> None:
        if (weights is None) == (detections is None):
            raise InputError("Tracker: give weights (a detector) or detections (a folder of files), one of them")
        if detections is not None and predictor_settings:
            raise InputError(f"Tracker: detector settings {sorted(predictor_settings)} given with detections")
        if isinstance(tracker, MultiObjectTracker) and not isinstance(tracker, type):
            self.tracker = tracker
        else:
            self.tracker = make_tracker(tracker, **({} if cmc is None else {"cmc": cmc}))
        self.detections = None if detections is None else detection_files(Path(detections))
        self.predictor = None
        if isinstance(weights, SequenceDetector):  # a Predictor, or one made for tests
            self.predictor = weights
        elif weights is not None:
            if predictor_settings.get("config") is None:
                predictor_settings.setdefault("conf", TRACK_CONF)
            # looked up at call time: `tphyolo.predict.predictor.Predictor` is the one place a detector is built
            self.predictor = prediction.Predictor(weights, **predictor_settings)

    @property
    def names(self) -> tuple[str, ...]:
        """The class names: the detector's, or VisDrone's for precomputed detections."""
        return VISDRONE_NAMES if self.predictor is None else tuple(self.predictor.names)

    @property
    def tracker_name(self) -> str:
        """The tracker's name in the registry (its settings' `tracker` field)."""
        return self.tracker.config.tracker

    def tracker_settings(self) -> dict[str, Any]:
        """The tracker's settings as a mapping (`tracker`: its class name for settings that are no dataclass)."""
        config = self.tracker.config
        return asdict(config) if is_dataclass(config) else {"tracker": type(self.tracker).__name__}

    @property
    def cmc(self) -> str:
        """The tracker's camera-motion compensation ('none' for a tracker without the setting)."""
        return camera_compensation(self.tracker)

    def __call__(self, source: Any = None, *, vid_stride: int = 1, on_skip: SkipHandler | None = None
                 ) -> Iterator[Results]:  # fmt: skip
        """The tracked `Results` of every frame of every sequence of `source` (see the class docstring)."""
        names = self.names
        for _, frames in self.sequences(source, vid_stride=vid_stride, on_skip=on_skip):
            for frame in frames:
                yield frame.results(names)

    def sequences(self, source: Any = None, *, vid_stride: int = 1, on_skip: SkipHandler | None = None
                  ) -> Iterator[tuple[str, Iterator[TrackedFrame]]]:  # fmt: skip
        """(name, its frames as they are tracked) per sequence of `source`; each sequence's frames are read as
        they are iterated, the sequence before the next. Bad sources and settings are refused here, before any
        frame is read. on_skip: called with a file that does not decode and the error, which is then skipped
        (default: the error stops the detector's frames)."""
        if vid_stride < 1:
            raise InputError(f"vid_stride must be at least 1, got {vid_stride}")
        if self.detections is not None:
            return self._detection_sequences(source, vid_stride)
        if source is None:
            raise InputError("Tracker: give a source (a video, a folder of frames, ...) for the detector to run on")
        sequences = resolve_sequences(source)
        return ((s.name, self._detector_frames(s, vid_stride, on_skip)) for s in sequences)

    def _detector_frames(self, sequence: VideoSequence, vid_stride: int, on_skip: SkipHandler | None
                         ) -> Iterator[TrackedFrame]:  # fmt: skip
        tracked = self.predictor.track_sequence(sequence, self.tracker, on_skip=on_skip, vid_stride=vid_stride)
        for frame, result in tracked:
            name = None if frame.is_video else Path(frame.path).name
            yield TrackedFrame(result.frame, frame.image, frame.path, name, frame.fps, result.boxes.numpy(),
                               result.ids.numpy(), result.scores.numpy(), result.labels.numpy())  # fmt: skip

    def _detection_sequences(self, source: Any, vid_stride: int) -> Iterator[tuple[str, Iterator[TrackedFrame]]]:
        if source is None and self.cmc != "none":
            raise InputError(f"tracker {self.tracker_name} compensates camera motion ({self.cmc}) from "
                             "the frames: give their source with the detections, or cmc none")  # fmt: skip
        paired = pair_sequences(self.detections, source)
        return ((name, self._detection_frames(path, sequence, vid_stride)) for name, (path, sequence) in paired.items())

    def _detection_frames(self, path: Path, sequence: VideoSequence | None, vid_stride: int
                          ) -> Iterator[TrackedFrame]:  # fmt: skip
        read: dict[int, tuple[Path | str, str | None, float | None]] = {}  # frame number -> path, name, fps

        def images() -> Iterator[tuple[int, np.ndarray]]:
            for position, frame in enumerate(iter_frames(list(sequence.files), vid_stride=vid_stride)):
                number = sequence.frame_number(frame, position)
                read[number] = (frame.path, None if frame.is_video else Path(frame.path).name, frame.fps)
                yield number, frame.image

        tracked = track_detections(read_detections(path), self.tracker, frames=None if sequence is None else images())
        for number, image, tracks in tracked:
            frame_path, name, fps = read.pop(number, (None, None, None))
            yield TrackedFrame(number, image, frame_path, name, fps, tracks.boxes, tracks.ids, tracks.scores,
                               class_ids(tracks.labels), tracks.labels)  # fmt: skip

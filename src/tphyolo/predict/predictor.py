"""Batched inference from a model or checkpoints, with test-time augmentation, sliced inference and ensembles.

    predictor = Predictor("best.pt", imgsz=1536, conf=0.25, tta=True, slice=1024)
    for result in predictor("images/"):
        result.boxes  # (N, 4) xyxy in original-image pixels
        result.save(f"out/{result.path.name}")  # see tphyolo.predict.results.Results

How one image is processed: it is cut into windows (the whole image unless slicing), each window is
letterboxed to `imgsz` (long side; short side padded to a stride multiple; for a fixed-size export, to its
shape, padded the whole way) and run through the inference core
(`tphyolo.infer.detector.Detector`): every model with every TTA pass, each run suppressed by NMS and mapped
back to original pixels. The runs of one (model, pass) over all windows form one detection list; the lists of
an image are merged by WBF (weights: the per-model weights) or by NMS. With a crop classifier, the merged
detections of its classes are then re-labelled from crops of the original image (`Detector.reclassify`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from tphyolo.classify.classifier import CropClassifier
from tphyolo.errors import InputError
from tphyolo.infer.backends.base import Backend
from tphyolo.infer.backends.pytorch import Weights, what_ran
from tphyolo.infer.build import build_detector, spec_device, spec_runtime
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import SliceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.infer.tta_config import TTAConfig
from tphyolo.infer.windows import image_windows, view_batches
from tphyolo.ops.detections import Detections
from tphyolo.predict.inputs import in_memory_images
from tphyolo.predict.results import Results
from tphyolo.predict.sequences import VideoSequence, resolve_sequences
from tphyolo.predict.sources import Frame, Stream, iter_frames, resolve_source, source_units
from tphyolo.runtime.config import RuntimeConfig


class FrameTracker(Protocol):
    """What `Predictor.track` needs of a tracker (`tphyolo.track.tracker.ByteTracker` is one): `reset()` before each
    sequence, and `update(boxes (N, 4) xyxy, scores (N,), labels (N,), *, frame)` per frame (numpy arrays and
    the uint8 BGR image) returning the tracks seen, with `boxes`, `ids`, `scores` and `labels` arrays."""

    def reset(self) -> None: ...

    def update(self, boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, *, frame: np.ndarray) -> Any: ...


class Predictor:
    """Detects objects in images with one model or an ensemble.

    weights: a model, a checkpoint path, or a sequence of them (an ensemble; `model_weights` gives each
    model's WBF weight, default 1). config: an InferenceConfig (thresholds, TTA, merging, image size, batch);
    its fields may also be given as keywords (`imgsz=1536, conf=0.25`), with `tta=True` (the paper's passes)
    or a TTAConfig as a shorthand for `augment` and the TTA passes. An `imgsz` that is not a multiple of the
    largest stride is rounded up, with a warning. slice: a window size in original pixels, "auto" (the
    network input size), "model" (a checkpoint trained on tiles: its tile size, else none; `settled_slicing`) or
    a SliceConfig.
    runtime: how to run (device, fp16 weights with `half`, channels_last, compile, autocast); `device`
    overrides its device. A checkpoint file on the CPU runs on OpenVINO by default, compiled once and cached
    (`backend="pytorch"` keeps PyTorch; `backend="onnxruntime"`, `precision="bf16"`: see InferenceConfig).
    fuse: fold BatchNorm into convolutions first. classifier: a crop-classifier
    checkpoint (or a CropClassifier) whose classes are among the models' names; it re-labels the detections of
    its classes, with its share `classifier_weight` (default: the one saved with it). The keywords make one
    `DetectorSpec` (`DetectorSpec.from_keywords`, kept as `spec`); `Predictor.from_spec(spec)` takes one whole.

    Calling it on a source returns one `Results` (a `Detections` with class names, source, original shape and
    the helpers plot/save/crop/to_dict) per image or video frame. A source is a path, folder, glob, .txt list,
    video, webcam index or video URL (`tphyolo.predict.sources`), or a sequence of paths; or in-memory images
    (`tphyolo.predict.inputs`): uint8 numpy arrays (BGR, or RGB with `rgb=True`), PIL images, torch tensors
    (RGB), or a list of them. `track(source, tracker)` streams the results of videos with track ids.
    """

    def __init__(
        self,
        weights: Weights | Sequence[Weights],
        config: InferenceConfig | None = None,
        *,
        runtime: RuntimeConfig | None = None,
        device: str | torch.device | None = None,
        slice: int | str | SliceConfig | None = None,  # noqa: A002 - the public keyword is `slice`
        model_weights: Sequence[float] | None = None,
        fuse: bool = True,
        classifier: str | Path | CropClassifier | None = None,
        classifier_weight: float | None = None,
        **settings,
    ) -> None:
        spec = DetectorSpec.from_keywords(
            weights, config, runtime=runtime or RuntimeConfig(), device=device, slice=slice,
            model_weights=model_weights, fuse=fuse, classifier=classifier, classifier_weight=classifier_weight,
            **settings,
        )  # fmt: skip
        self._build(spec)

    @classmethod
    def from_spec(cls, spec: DetectorSpec, *, backends: Sequence[Backend] | None = None) -> Predictor:
        """The Predictor of `spec` (`build_detector`); `backends`: its models, already loaded (nothing is loaded
        again). What jobs (`PredictJob`, `TrackJob`, the service) build theirs with."""
        predictor = cls.__new__(cls)
        predictor._build(spec, backends)
        return predictor

    def _build(self, spec: DetectorSpec, backends: Sequence[Backend] | None = None) -> None:
        built = build_detector(spec, backends=backends)
        self.spec, self.runtime, self.device = spec, spec_runtime(spec), spec_device(spec)
        self.detector, self.config, self.slicing = built.detector, built.config, built.slicing

    def with_settings(
        self,
        config: InferenceConfig,
        *,
        slice: SliceConfig | None = None,  # noqa: A002 - the public keyword is `slice`
        classifier: bool = True,
    ) -> Predictor:
        """A Predictor sharing these loaded models (and crop classifier, unless `classifier` is False) with
        other settings: `config`, `slice`. Nothing is loaded again; this Predictor is unchanged. Raises
        ValueError as the constructor does (a class id the models do not have)."""
        spec = replace(self.spec, inference=config, slicing=slice, classifier_weight=None,
                       classifier=self.detector.classifier if classifier else None)  # fmt: skip
        return Predictor.from_spec(spec, backends=self.backends)

    @property
    def names(self) -> list[str]:
        return self.detector.names

    @property
    def tta(self) -> TTAConfig:
        return self.config.tta

    @property
    def backends(self) -> list:
        return self.detector.backends

    @property
    def decisions(self) -> dict:
        """What runs the model(s) and why: runtime, precision, layout, threads (`backends.pytorch.what_ran`)."""
        return what_ran(self.backends)

    def __call__(self, source, *, rgb: bool = False, vid_stride: int = 1) -> list[Results]:
        """Results of every image of `source` (see the class docstring), in order; `rgb`: numpy arrays are RGB;
        `vid_stride`: every how many frames of a video one is read. The images of files are not kept in the
        results (`Results.load_image` reads them again); in-memory images and stream frames are."""
        images = in_memory_images(source, rgb=rgb)
        if images is not None:
            return self.predict_images(images)
        return [
            result if isinstance(result.path, str) else replace(result, image=None)
            for _, result in self.stream(source, vid_stride=vid_stride)
        ]

    def stream(
        self,
        source,
        *,
        on_skip: Callable[[Path | Stream, Exception], None] | None = None,
        vid_stride: int = 1,
        units: Sequence[Sequence[int]] | None = None,
    ) -> Iterator[tuple[Frame, Results]]:
        """Each frame of a file or stream `source` with its results (image kept), up to `config.batch` frames
        at a time and never frames of two units (`sources.source_units`: a group of images, a video), so that
        a batch is the same whatever else runs; every `vid_stride`-th frame of a video. units: only these
        groups of file positions, in this order (default: all of them). A file that does not decode stops the
        stream, or with `on_skip` is passed to it (file, error) and skipped."""
        files = resolve_source(source)
        units = source_units(files, batch=self.config.batch) if units is None else units
        unit_of = {position: k for k, unit in enumerate(units) for position in unit}
        batch: list[Frame] = []
        only = [position for unit in units for position in unit]
        for frame in iter_frames(files, only=only, on_skip=on_skip, vid_stride=vid_stride):
            if batch and unit_of[frame.file] != unit_of[batch[0].file]:
                yield from self._frames_results(batch)
                batch = []
            batch.append(frame)
            if len(batch) == self.config.batch:
                yield from self._frames_results(batch)
                batch = []
        if batch:
            yield from self._frames_results(batch)

    def track(
        self,
        source,
        tracker: FrameTracker,
        *,
        on_skip: Callable[[Path | Stream, Exception], None] | None = None,
        vid_stride: int = 1,
    ) -> Iterator[Results]:
        """The results of every frame of the video sequences of `source` (`tphyolo.predict.sequences`), holding
        the tracks seen in that frame: boxes from `tracker`, `ids` its track ids, `frame` the frame's number in
        its sequence (from 1, as in the MOT files), image kept. `tracker` (a `tphyolo.track.tracker.ByteTracker`,
        or anything with its `reset` and `update`) starts afresh at each sequence.
        `on_skip`, `vid_stride`: as `stream`."""
        for sequence in resolve_sequences(source):
            for _, result in self.track_sequence(sequence, tracker, on_skip=on_skip, vid_stride=vid_stride):
                yield result

    def track_sequence(
        self,
        sequence: VideoSequence,
        tracker: FrameTracker,
        *,
        on_skip: Callable[[Path | Stream, Exception], None] | None = None,
        vid_stride: int = 1,
    ) -> Iterator[tuple[Frame, Results]]:
        """`track` over one sequence, from a reset tracker: each frame with its tracked results."""
        tracker.reset()
        frames = self.stream(list(sequence.files), on_skip=on_skip, vid_stride=vid_stride)
        for position, (frame, result) in enumerate(frames):
            tracks = tracker.update(result.boxes.numpy(), result.scores.numpy(), result.labels.numpy(),
                                    frame=frame.image)  # fmt: skip
            tracked = result.tracked(tracks.boxes, tracks.ids, tracks.scores, tracks.labels)
            yield frame, replace(tracked, frame=sequence.frame_number(frame, position))

    def _frames_results(self, frames: list[Frame]) -> Iterator[tuple[Frame, Results]]:
        results = self.predict_images([f.image for f in frames])
        for frame, result in zip(frames, results, strict=True):
            yield frame, replace(result, path=frame.path, frame=frame.index + 1 if frame.is_video else 0)

    def predict_images(self, images: Sequence[np.ndarray]) -> list[Results]:
        """Results of uint8 BGR (H, W, 3) images, in original pixels, each with its image."""
        for i, image in enumerate(images):
            if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
                raise InputError(f"image {i}: expected uint8 (H, W, 3), got {image.dtype} {image.shape}")
        windows = image_windows(images, self.slicing)
        batches = view_batches(images, windows, detector=self.detector, imgsz=self.config.imgsz,
                               batch=self.config.batch)  # fmt: skip
        sizes = [image.shape[:2] for image in images]
        rows = self.detector(batches, owners=[w.owner for w in windows], sizes=sizes, images=images)
        names = tuple(self.names)
        return [
            _with_source(Detections.from_rows(r), names=names, image=image)
            for r, image in zip(rows, images, strict=True)
        ]


def _with_source(detections: Detections, *, names: tuple[str, ...], image: np.ndarray) -> Results:
    h, w = image.shape[:2]
    return Results(detections.boxes, detections.scores, detections.labels, names=names, shape=(h, w), image=image)

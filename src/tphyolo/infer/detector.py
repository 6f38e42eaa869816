"""The inference core: network input -> TTA passes -> NMS -> original-image pixels -> merged detections.

Prediction (`Predictor`), validation (`evaluate`, `tphyolo val`) and every model backend go through one
path, `Detector`, configured by one frozen `InferenceConfig`, in one call from prepared views to each image's
final detections in original pixels:

    detector = Detector(backends, InferenceConfig(conf=0.25, augment=True))
    x = detector.prepare(images)                             # (B, 3, H, W) letterboxed uint8 RGB -> input
    batch = ViewBatch(x, views=[View.of(info, w, h) ...], ids=range(B))
    rows = detector([batch], owners=range(B), sizes=[(h, w), ...], images=originals)  # [image] (n, 6)

The steps the call makes are methods of their own (`detect`, `combine`, `reclassify`):

    runs = detector.detect(x)                                # [run][image] (n, 6) rows in input pixels
    rows = detector.combine([[view.rows_to_original(run[i])] for run in runs], width=w, height=h)

A run is one backend with one TTA pass (backend-major); each run is suppressed by NMS on its own. An image's
runs (each the concatenation of its views, e.g. slicing windows) are merged by WBF (weights: the per-backend
weights) or NMS; one run of one view is returned as it is, so plain inference, TTA with the identity pass
only and slicing of an image that is one window give the same detections. With a crop classifier, the
merged detections of a batch of images are then re-labelled from the original images (`reclassify`):

    rows = detector.reclassify([rows_0, rows_1, ...], [image_0, image_1, ...])  # arrays or paths
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from tphyolo.classify.classifier import CropClassifier, resolve_class_ids
from tphyolo.classify.relabel import Image, reclassify_rows
from tphyolo.data.letterbox import LetterboxInfo
from tphyolo.errors import InputError
from tphyolo.infer.backends.base import Backend
from tphyolo.infer.config import RECLASSIFY_MIN_SCORE, InferenceConfig
from tphyolo.infer.input_shape import fixed_input_shape
from tphyolo.infer.merge import merge_detections
from tphyolo.infer.tta import augment, unaugment
from tphyolo.ops import non_max_suppression, unletterbox


@dataclass(frozen=True)
class View:
    """Where a network input image came from: a width x height region of the original image with top-left
    corner `offset`, letterboxed with `ratio` (rx, ry) and `pad` (left, top) as LetterboxInfo records them.
    min_size: only boxes whose longer side is at least this many original pixels are kept from this view."""

    ratio: tuple[float, float]
    pad: tuple[float, float]
    width: int
    height: int
    offset: tuple[int, int] = (0, 0)
    min_size: float = 0.0

    @classmethod
    def of(
        cls, info: LetterboxInfo, width: int, height: int, offset: tuple[int, int] = (0, 0), min_size: float = 0.0
    ) -> View:
        """The view of a `width` x `height` region at `offset`, letterboxed as `info` records."""
        return cls(tuple(info.ratio), tuple(info.pad), width, height, offset, min_size)

    def unletterbox(self, boxes: torch.Tensor) -> torch.Tensor:
        """(n, 4) xyxy in network-input pixels -> float32 xyxy in original pixels (clipped to the region), CPU."""
        return unletterbox(
            boxes.cpu(), ratio=self.ratio, pad=self.pad, width=self.width, height=self.height, offset=self.offset
        )

    def rows_to_original(self, rows: torch.Tensor) -> torch.Tensor:
        """(n, 6) detection rows in network-input pixels -> a float32 CPU copy in original pixels, less the boxes
        smaller than `min_size`."""
        rows = rows.float().cpu().clone()
        rows[:, :4] = self.unletterbox(rows[:, :4])
        if self.min_size > 0:
            sides = torch.maximum(rows[:, 2] - rows[:, 0], rows[:, 3] - rows[:, 1])
            rows = rows[sides >= self.min_size]
        return rows


@dataclass(frozen=True)
class ViewBatch:
    """A prepared network input `x` (B, 3, H, W) with the View of each of its B images and their ids, unique
    over one `Detector` call (the views of one original image, e.g. slicing windows, may span batches)."""

    x: torch.Tensor
    views: Sequence[View]
    ids: Sequence[int]


class PhaseTimes(dict):
    """Seconds spent per phase of a `Detector` call ("inference": the runs with NMS; "mapping": back to
    original pixels and merged over runs and views; "classify": the crop classifier), the device synchronised
    around each phase."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device = device

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = self._now()
        yield
        self[name] = self.get(name, 0.0) + self._now() - start


class Detector:
    """Backends run with one InferenceConfig: the one path from network input to merged detections.

    backends: one, or several (an ensemble) sharing a device and an input dtype; weights: each backend's WBF
    weight (default 1); classifier: a crop classifier for these backends' classes (`as_classifier`) that
    `reclassify` applies to the merged detections.
    """

    def __init__(
        self,
        backends: Sequence[Backend],
        config: InferenceConfig,
        *,
        weights: Sequence[float] | None = None,
        classifier: CropClassifier | None = None,
    ) -> None:
        if not backends:
            raise InputError("a Detector needs at least one backend")
        if len({(b.device, b.dtype) for b in backends}) > 1:
            raise InputError("the backends of one Detector must share a device and an input dtype")
        if weights is not None and len(weights) != len(backends):
            raise InputError(f"{len(weights)} model weights for {len(backends)} models")
        self.backends, self.config = list(backends), config
        self.names = list(backends[0].names)
        config.check_classes(len(self.names))
        self.stride = max(b.stride for b in backends)
        self.fixed_shape = fixed_input_shape(backends, config)  # (h, w) inputs must have, or None: any
        self.device = backends[0].device
        passes = len(config.tta.passes())
        self.run_weights = [float(w) for w in (weights or [1.0] * len(backends)) for _ in range(passes)]
        if classifier is not None and resolve_class_ids(classifier.names, self.names) != classifier.class_ids:
            raise InputError(f"classifier class ids {classifier.class_ids} do not match the detector's {self.names}")
        self.classifier = classifier

    @property
    def num_runs(self) -> int:
        """Runs per input: backends x TTA passes."""
        return len(self.run_weights)

    def __call__(
        self,
        batches: Iterable[ViewBatch],
        *,
        owners: Sequence[int],
        sizes: Sequence[tuple[int, int]],
        images: Sequence[Image],
        times: PhaseTimes | None = None,
    ) -> list[torch.Tensor]:
        """The final detections of each original image: one (n, 6) list per image in its pixels, by descending
        score, merged over runs and views and re-labelled by the crop classifier.

        batches: every view of the images, prepared (`prepare`), with ids 0..V-1 over all batches; owners[id]:
        the image of view `id`; sizes[i]: (height, width) of image i; images[i]: image i as a uint8 BGR array
        or its path (read only by a crop classifier). `times` adds the seconds of each phase.
        """
        times = times if times is not None else PhaseTimes(self.device)
        per_view: list[list[torch.Tensor | None]] = [[None] * len(owners) for _ in range(self.num_runs)]
        for batch in batches:
            with times.phase("inference"):
                runs = self.detect(batch.x)
            with times.phase("mapping"):
                for r, rows_of_view in enumerate(runs):
                    for view, view_id, rows in zip(batch.views, batch.ids, rows_of_view, strict=True):
                        per_view[r][view_id] = view.rows_to_original(rows)
        with times.phase("mapping"):
            views_of: list[list[int]] = [[] for _ in sizes]
            for view_id, owner in enumerate(owners):
                views_of[owner].append(view_id)
            merged = [
                self.combine([[run[v] for v in views] for run in per_view], width=w, height=h)
                for views, (h, w) in zip(views_of, sizes, strict=True)
            ]
        if self.classifier is None:
            return merged
        with times.phase("classify"):
            return self.reclassify(merged, images)

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 RGB images -> the backends' input."""
        return self.backends[0].prepare(images)

    @torch.inference_mode()
    def detect(self, x: torch.Tensor) -> list[list[torch.Tensor]]:
        """Every run on `x` (B, 3, H, W): [run][image] (n, 6) rows x1, y1, x2, y2, score, class in the pixels
        of `x`, each suppressed by NMS, by descending score."""
        cfg, out = self.config, []
        for backend in self.backends:
            for scale, flip in cfg.tta.passes():
                if (scale, flip) == (1.0, "none"):
                    prediction = backend.run(x)
                else:
                    xa, geometry = augment(x, scale=scale, flip=flip, stride=self.stride)
                    prediction = unaugment(backend.run(xa), geometry)
                out.append(
                    non_max_suppression(
                        prediction.float(),
                        conf_thres=cfg.conf,
                        iou_thres=cfg.iou,
                        classes=cfg.classes,
                        agnostic=cfg.agnostic,
                        max_det=cfg.max_det,
                    )
                )
        return out

    def combine(self, runs: Sequence[Sequence[torch.Tensor]], *, width: int, height: int) -> torch.Tensor:
        """One image's detections from [run][view] rows in original pixels: each run's views are concatenated
        and the runs merged (one run of one view is returned as it is). (n, 6), by descending score.

        `max_det` is per window: each run of each view keeps at most that many (NMS), and the merge of V views
        keeps up to V x max_det -- so a sliced image gives what the same windows give as a raster's tiles."""
        if len(runs) == 1 and len(runs[0]) == 1:
            return runs[0][0]
        if not any(len(views) for views in runs):  # every window of the image was skipped (empty)
            return torch.zeros((0, 6))
        cfg = self.config
        return merge_detections(
            [torch.cat(list(views)) if len(views) else torch.zeros((0, 6)) for views in runs],
            method=cfg.merge,
            width=width,
            height=height,
            iou=cfg.merge_threshold,
            max_det=cfg.max_det * max(len(views) for views in runs),
            weights=self.run_weights,
            agnostic=cfg.merge_across_classes,
            match=cfg.match,
        )

    def reclassify(self, rows: Sequence[torch.Tensor], images: Sequence[Image]) -> list[torch.Tensor]:
        """The final detections of a batch of images -- one (n, 6) list per image in original pixels, as
        `combine` gives them -- re-labelled by the crop classifier (`tphyolo.classify.relabel.reclassify_rows`:
        the detections of its classes scoring at least RECLASSIFY_MIN_SCORE, cropped from `images`, the
        original uint8 BGR images or their paths, and classified together). Without a classifier, the rows."""
        if self.classifier is None:
            return list(rows)
        return reclassify_rows(self.classifier, rows, images, min_score=RECLASSIFY_MIN_SCORE)

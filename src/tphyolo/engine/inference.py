"""The inference core: network input -> TTA passes -> NMS -> original-image pixels -> merged detections.

Prediction (`Predictor`), validation (`evaluate`, `tphyolo val`) and every model backend go through one
path, `Detector`, configured by one frozen `InferenceConfig`:

    detector = Detector(backends, InferenceConfig(conf=0.25, augment=True))
    runs = detector.detect(detector.prepare(images))        # [run][image] (n, 6) rows in input pixels
    rows = detector.combine([[view.rows_to_original(run[i])] for run in runs], width=w, height=h)

A run is one backend with one TTA pass (backend-major); each run is suppressed by NMS on its own. An image's
runs (each the concatenation of its views, e.g. slicing windows) are merged by WBF (weights: the per-backend
weights) or NMS; one run of one view is returned as it is, so plain inference, TTA with the identity pass
only and slicing of an image that is one window give the same detections. With a crop classifier, the
merged detections of a batch of images are then re-labelled from the original images (`reclassify`):

    rows = detector.reclassify([rows_0, rows_1, ...], [image_0, image_1, ...])  # arrays or paths
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torchvision.ops import batched_nms

from tphyolo.classify.classifier import CropClassifier, resolve_class_ids
from tphyolo.classify.relabel import Image, reclassify_rows
from tphyolo.engine.backends import Backend
from tphyolo.engine.tta import DEFAULT_FLIPS, FLIPS, PAPER_SCALES, PLAIN, TTAConfig, augment, unaugment
from tphyolo.flags import check_field_types, flag, setting_name
from tphyolo.ops import clip_boxes, non_max_suppression, unletterbox
from tphyolo.ops.wbf import weighted_boxes_fusion

MAX_DET = 500  # detections kept per image: the VisDrone protocol scores up to 500
PREDICT_CONF = 0.25  # confidence threshold when predicting
PREDICT_IOU = 0.45  # NMS IoU threshold when predicting
VAL_CONF = 0.001  # confidence threshold when scoring (a full precision-recall curve)
VAL_IOU = 0.6  # NMS IoU threshold when scoring
VAL_BATCH = 32  # images per forward pass when scoring
WBF_IOU = 0.55  # the IoU threshold of weighted boxes fusion unless given
MERGE_METHODS = ("wbf", "nms")
RECLASSIFY_MIN_SCORE = 0.01  # detections scoring less are not re-classified (validation keeps thousands of them)


@dataclass(frozen=True)
class InferenceConfig:
    """How detections are made; every field is also the command-line flag of `predict` and `val`.

    imgsz: network input size (long side) of each image or slice, rounded up to a stride multiple by whoever
    letterboxes (`check_imgsz`); batch: images or slices per forward pass. conf, iou: NMS thresholds of each
    run; max_det: most detections per image. classes: keep only these ids; agnostic: suppress across classes.
    augment: test-time augmentation with every scale of `tta_scales` and flip of `tta_flips`. merge: "wbf" or
    "nms" for combining runs; merge_iou: its IoU threshold (default `merge_threshold`).
    """

    imgsz: int = flag(640, "--img", "--imgsz", help="inference size (long side), pixels")
    batch: int = flag(1, "--batch", help="images (or slices) per forward pass")
    conf: float = flag(PREDICT_CONF, "--conf", help="confidence threshold")
    iou: float = flag(PREDICT_IOU, "--iou", help="NMS IoU threshold")
    max_det: int = flag(MAX_DET, "--max-det", help="most detections per image")
    classes: tuple[int, ...] | None = flag(None, "--classes", help="keep only these class ids")
    agnostic: bool = flag(False, "--agnostic-nms", help="suppress across classes")
    augment: bool = flag(False, "--augment", help="test-time augmentation")
    tta_scales: tuple[float, ...] = flag(PAPER_SCALES, "--tta-scales", help="TTA input scales")
    tta_flips: tuple[str, ...] = flag(DEFAULT_FLIPS, "--tta-flips", choices=FLIPS, help="TTA flips")
    merge: str = flag("wbf", "--merge", choices=MERGE_METHODS, help="how TTA, ensemble and slice runs are merged")
    merge_iou: float | None = flag(
        None, "--merge-iou", help=f"merge IoU threshold (default: {WBF_IOU} for wbf, --iou for nms)"
    )

    def __post_init__(self) -> None:
        """Raises ValueError naming the flag (`setting_name`) of the first setting that is out of range or has no
        effect (TTA passes without `augment`)."""
        for name in ("classes", "tta_scales", "tta_flips"):  # lists (from Python callers) become tuples
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        check_field_types(self)
        for name in ("imgsz", "batch", "max_det"):
            if getattr(self, name) < 1:
                raise ValueError(f"{setting_name(self, name)} must be >= 1, got {getattr(self, name)}")
        for name in ("conf", "iou", "merge_iou"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{setting_name(self, name)} must be in [0, 1], got {value}")
        if self.merge not in MERGE_METHODS:
            raise ValueError(
                f"unknown {setting_name(self, 'merge')} method {self.merge!r}; known: {list(MERGE_METHODS)}"
            )
        if self.classes is not None and any(c < 0 for c in self.classes):
            raise ValueError(f"{setting_name(self, 'classes')} takes class ids >= 0, got {list(self.classes)}")
        TTAConfig(self.tta_scales, self.tta_flips)  # validates them
        if not self.augment and (self.tta_scales, self.tta_flips) != (PAPER_SCALES, DEFAULT_FLIPS):
            names = f"{setting_name(self, 'tta_scales')}/{setting_name(self, 'tta_flips')}"
            raise ValueError(f"{names} choose the passes of {setting_name(self, 'augment')}; add it or drop them")

    def check_classes(self, num_classes: int) -> None:
        """Raises ValueError when `classes` names an id the model does not have (ids 0..num_classes-1)."""
        unknown = [c for c in self.classes or () if c >= num_classes]
        if unknown:
            raise ValueError(
                f"{setting_name(self, 'classes')} {' '.join(map(str, unknown))}: the model has {num_classes} "
                f"classes (ids 0..{num_classes - 1})"
            )

    @property
    def tta(self) -> TTAConfig:
        """The TTA passes run: the configured ones with `augment`, else the identity pass alone."""
        return TTAConfig(self.tta_scales, self.tta_flips) if self.augment else PLAIN

    @property
    def merge_threshold(self) -> float:
        """The IoU threshold of merging: `merge_iou` when given, else WBF_IOU for WBF and `iou` for NMS."""
        if self.merge_iou is not None:
            return self.merge_iou
        return WBF_IOU if self.merge == "wbf" else self.iou


VAL_DEFAULTS = {"conf": VAL_CONF, "iou": VAL_IOU, "batch": VAL_BATCH}  # where scoring differs from predicting
VALIDATION = InferenceConfig(**VAL_DEFAULTS)


def inference_config(
    config: InferenceConfig | None = None, *, tta: bool | TTAConfig | None = None, **fields
) -> InferenceConfig:
    """`config` (default InferenceConfig()) with `fields` replaced; `tta` is a shorthand: True for the
    paper's passes, a TTAConfig for its passes, False for none."""
    if isinstance(tta, TTAConfig):
        fields |= {"augment": True, "tta_scales": tta.scales, "tta_flips": tta.flips}
    elif tta:
        fields["augment"] = True
    elif tta is not None:  # no TTA: the passes go back to their defaults, which then have no effect
        fields |= {"augment": False, "tta_scales": PAPER_SCALES, "tta_flips": DEFAULT_FLIPS}
    return replace(config or InferenceConfig(), **fields)


@dataclass(frozen=True)
class View:
    """Where a network input image came from: a width x height region of the original image with top-left
    corner `offset`, letterboxed with `ratio` (rx, ry) and `pad` (left, top) as LetterboxInfo records them."""

    ratio: tuple[float, float]
    pad: tuple[float, float]
    width: int
    height: int
    offset: tuple[int, int] = (0, 0)

    def unletterbox(self, boxes: torch.Tensor) -> torch.Tensor:
        """(n, 4) xyxy in network-input pixels -> float32 xyxy in original pixels (clipped to the region), CPU."""
        return unletterbox(
            boxes.cpu(), ratio=self.ratio, pad=self.pad, width=self.width, height=self.height, offset=self.offset
        )

    def rows_to_original(self, rows: torch.Tensor) -> torch.Tensor:
        """(n, 6) detection rows in network-input pixels -> a float32 CPU copy in original pixels."""
        rows = rows.float().cpu().clone()
        rows[:, :4] = self.unletterbox(rows[:, :4])
        return rows


def merge_detections(
    lists: Sequence[torch.Tensor],
    *,
    method: str,
    width: float,
    height: float,
    iou: float,
    max_det: int,
    weights: Sequence[float] | None = None,
    agnostic: bool = False,
) -> torch.Tensor:
    """Merge several (n_i, 6) detection lists of one width x height image (pixels) into one (n, 6) list.

    "wbf": weighted boxes fusion with `iou` as its threshold and `weights` per list (boxes are normalised for
    the fusion and scaled back); "nms": the union suppressed per class (or across classes, `agnostic`).
    Result sorted by descending score, at most `max_det` rows.
    """
    if method not in MERGE_METHODS:
        raise ValueError(f"unknown merge method {method!r}; known: {list(MERGE_METHODS)}")
    device = lists[0].device if lists else torch.device("cpu")
    if method == "nms":
        rows = torch.cat(list(lists)) if lists else torch.zeros((0, 6), device=device)
        groups = torch.zeros_like(rows[:, 5]) if agnostic else rows[:, 5]
        keep = batched_nms(rows[:, :4].float(), rows[:, 4].float(), groups.long(), iou)[:max_det]
        return rows[keep]
    scale = torch.tensor([width, height, width, height], dtype=torch.float64)
    boxes, scores, labels = weighted_boxes_fusion(
        [(r[:, :4].double().cpu() / scale).numpy() for r in lists],
        [r[:, 4].double().cpu().numpy() for r in lists],
        [r[:, 5].double().cpu().numpy() for r in lists],
        weights=weights,
        iou_thr=iou,
        conf_type="avg",
    )
    rows = torch.from_numpy(np.concatenate([boxes * scale.numpy(), scores[:, None], labels[:, None]], axis=1))
    rows = rows[:max_det].float().reshape(-1, 6)
    rows[:, :4] = clip_boxes(rows[:, :4], width=width, height=height)  # undo rounding past the edges
    return rows.to(device)


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
            raise ValueError("a Detector needs at least one backend")
        if len({(b.device, b.dtype) for b in backends}) > 1:
            raise ValueError("the backends of one Detector must share a device and an input dtype")
        if weights is not None and len(weights) != len(backends):
            raise ValueError(f"{len(weights)} model weights for {len(backends)} models")
        self.backends, self.config = list(backends), config
        self.names = list(backends[0].names)
        config.check_classes(len(self.names))
        self.stride = max(b.stride for b in backends)
        self.device = backends[0].device
        passes = len(config.tta.passes())
        self.run_weights = [float(w) for w in (weights or [1.0] * len(backends)) for _ in range(passes)]
        if classifier is not None and resolve_class_ids(classifier.names, self.names) != classifier.class_ids:
            raise ValueError(f"classifier class ids {classifier.class_ids} do not match the detector's {self.names}")
        self.classifier = classifier

    @property
    def num_runs(self) -> int:
        """Runs per input: backends x TTA passes."""
        return len(self.run_weights)

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
        and the runs merged (one run of one view is returned as it is). (n, 6), by descending score."""
        if len(runs) == 1 and len(runs[0]) == 1:
            return runs[0][0]
        cfg = self.config
        return merge_detections(
            [torch.cat(list(views)) for views in runs],
            method=cfg.merge,
            width=width,
            height=height,
            iou=cfg.merge_threshold,
            max_det=cfg.max_det,
            weights=self.run_weights,
            agnostic=cfg.agnostic,
        )

    def reclassify(self, rows: Sequence[torch.Tensor], images: Sequence[Image]) -> list[torch.Tensor]:
        """The final detections of a batch of images -- one (n, 6) list per image in original pixels, as
        `combine` gives them -- re-labelled by the crop classifier (`tphyolo.classify.relabel.reclassify_rows`:
        the detections of its classes scoring at least RECLASSIFY_MIN_SCORE, cropped from `images`, the
        original uint8 BGR images or their paths, and classified together). Without a classifier, the rows."""
        if self.classifier is None:
            return list(rows)
        return reclassify_rows(self.classifier, rows, images, min_score=RECLASSIFY_MIN_SCORE)

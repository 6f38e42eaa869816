"""The YOLO protocol: YOLOv5's P, R, mAP@0.5 and mAP@0.5:0.95 (101-point interpolation), the numbers training
reports.

It has no notion of ignore regions: they are not used, and crowd objects count as ordinary objects.
Detections of classes outside `names` (VisDrone's "others") are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tphyolo.metrics.ap import DetectionStats, Summary
from tphyolo.metrics.protocol import IgnoreRules, ImageResult, ProtocolResult
from tphyolo.metrics.registry import GEOJSON, VISDRONE_TXT


def yolo_labels(image: ImageResult) -> torch.Tensor:
    """(m, 5) class, x1, y1, x2, y2 in original pixels, as `DetectionStats` and `ConfusionMatrix` take them."""
    return torch.cat([image.classes[:, None].float(), image.boxes_as("xyxy", "boxes").float()], dim=1)


def yolo_detections(image: ImageResult, nc: int) -> torch.Tensor:
    """(n, 6) x1, y1, x2, y2, score, class of the detections of classes 0..nc-1."""
    d = torch.cat([image.boxes_as("xyxy", "detections"), image.detections[:, 4:]], dim=1)
    return d[(d[:, 5] >= 0) & (d[:, 5] < nc)]


def summarize(images: Sequence[ImageResult], *, nc: int, confusion=None) -> Summary:
    """YOLO metrics over `images` (a `tphyolo.metrics.Summary`); fills `confusion` (a ConfusionMatrix) when
    given."""
    stats = DetectionStats(nc)
    for image in images:
        detections, labels = yolo_detections(image, nc), yolo_labels(image)
        stats.update(detections, labels)
        if confusion is not None:
            confusion.update(detections, labels)
    return stats.summarize()


def summary_result(summary: Summary, names: Sequence[str]) -> ProtocolResult:
    """The ProtocolResult of a YOLO `Summary`: P, R, AP50, AP in percent, overall and per class."""
    overall = {"P": 100 * summary.mp, "R": 100 * summary.mr, "AP50": 100 * summary.map50, "AP": 100 * summary.map}
    per_class = {}
    if summary.result is not None:
        res = summary.result
        for i, c in enumerate(res.classes.tolist()):
            values = (res.p[i], res.r[i], res.ap50[i], res.ap50_95[i])
            per_class[str(names[c])] = {k: 100 * float(v) for k, v in zip(overall, values, strict=True)}
    return ProtocolResult("yolo", summary.map50, summary.map, overall, per_class, summary.table(names))


class YoloProtocol:
    """YOLOv5's validation metrics (see the module docstring)."""

    name = "yolo"
    needs_image_size = False
    saved_formats = (VISDRONE_TXT, GEOJSON)
    yolo_metrics = True
    ignore_rules = IgnoreRules()  # nothing is ignored; crowd objects are ordinary objects

    def score(self, images: Sequence[ImageResult], *, names: Sequence[str], max_det: int) -> ProtocolResult:
        """YOLO metrics; `max_det` is not used (the detections are already limited)."""
        return summary_result(summarize(images, nc=len(names)), names)

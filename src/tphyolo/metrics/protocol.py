"""The interface every scoring protocol implements, and the per-image results it scores.

A protocol turns the results of a set of images (detections and ground truth in original pixels) into its
numbers: `protocol.score(images, names=..., max_det=...) -> ProtocolResult`. Protocols are registered by name
in `tphyolo.metrics.registry.PROTOCOLS`; adding one is one module with a class like those of `metrics/yolo.py`,
`coco.py` and `visdrone.py`, plus one line there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol as _Interface

import torch

from tphyolo.ops.boxes import box_convert


@dataclass(frozen=True)
class ImageResult:
    """One image's detections and ground truth, in original-image pixels.

    detections: (n, 6) box, score, class, in the order they were produced (predictions come by descending
        score; a submission file's rows come in file order, which VisDrone's maxDets reads);
    classes (m,) int64 and boxes (m, 4): the objects; crowd: (m,) bool, objects that are neither hit nor miss
        (VisDrone objects of score 0), or None for none;
    ignore: (k, 4) regions to ignore for every class;
    shape: (height, width), or None where unknown (only a protocol that clips ignore regions to the image
        needs it, see `Protocol.needs_image_size`);
    box_format: how every box of the record is written, "xyxy" (predictions, datasets) or "xywh" (left, top,
        width, height, as read from VisDrone files: kept as written, so the file's numbers are scored exactly).
    """

    path: str
    shape: tuple[int, int] | None
    detections: torch.Tensor
    classes: torch.Tensor
    boxes: torch.Tensor
    ignore: torch.Tensor
    crowd: torch.Tensor | None = None
    box_format: str = "xyxy"

    def crowd_mask(self) -> torch.Tensor:
        """(m,) bool: which objects are crowd objects (all False when `crowd` is None)."""
        return self.crowd if self.crowd is not None else torch.zeros(len(self.classes), dtype=torch.bool)

    def boxes_as(self, fmt: str, which: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The `which` ("boxes", "ignore" or "detections") boxes in format `fmt`, converted in `dtype` (default:
        their own)."""
        boxes = self.detections[:, :4] if which == "detections" else getattr(self, which)
        return box_convert(boxes if dtype is None else boxes.to(dtype), self.box_format, fmt)


@dataclass(frozen=True)
class ProtocolResult:
    """The numbers of one protocol over a set of images.

    map50, map: mean AP at IoU 0.5 and over 0.50:0.95 as fractions (what checkpoint selection and `val`
    report); overall: the protocol's headline numbers in percent (e.g. "AP", "AP50", "AR500"); per_class:
    class name -> the same keys, for classes with objects; table: the protocol's table, ready to print;
    images_per_class: class name -> the images weighting it in the means, for a protocol whose table shows them
    (VisDrone's), else None.
    """

    protocol: str
    map50: float
    map: float
    overall: dict[str, float]
    per_class: dict[str, dict[str, float]]
    table: str
    images_per_class: dict[str, int] | None = None


def score_table(
    overall: Mapping[str, float],
    per_class: Mapping[str, Mapping[str, float]],
    images_per_class: Mapping[str, int] | None = None,
) -> str:
    """A protocol's numbers in percent as its table: a column per key of `overall`, a row for all, one per class
    of `per_class`; with `images_per_class`, an Images column after the class name."""
    images = images_per_class is not None
    lines = [f"{'Class':>16}" + (f"{'Images':>8}" if images else "") + "".join(f"{k:>8}" for k in overall)]
    lines.append(f"{'all':>16}" + (f"{'':>8}" if images else "") + "".join(f"{v:>8.2f}" for v in overall.values()))
    for name, values in per_class.items():
        count = f"{images_per_class[name]:>8d}" if images else ""
        lines.append(f"{name:>16}{count}" + "".join(f"{values[k]:>8.2f}" for k in overall))
    return "\n".join(lines)


@dataclass(frozen=True)
class IgnoreRules:
    """How a protocol treats crowd objects and ignore regions, for a matching of its own done outside its scorer
    (the report's one matching per image, IoU >= 0.5, by descending score):

    crowd: crowd objects are neither hit nor miss, and a detection that takes no object is ignored when at
        least half of its area lies on a crowd object of its class;
    drop_in_regions: objects and detections that lie in an ignored region
        (`tphyolo.metrics.ignored.in_ignored_regions`) are removed before matching (removed detections count as
        ignored); it needs the image size;
    on_region: a detection that takes no object is ignored when at least half of its area lies on one ignore
        region.
    """

    crowd: bool = False
    drop_in_regions: bool = False
    on_region: bool = False


class Protocol(_Interface):
    """A scoring protocol: `name`, whether it needs each image's size where there are ignore regions, whether
    its numbers are YOLO's own P/R/mAP (`yolo_metrics`: every run reports those; such a protocol adds no table
    or numbers of its own), how it treats ignore regions and crowd objects (`ignore_rules`), which files of
    saved detections it scores (`saved_formats`: the registry's VISDRONE_TXT, COCO_JSON, GEOJSON), and `score`."""

    name: str
    needs_image_size: bool
    saved_formats: tuple[str, ...]
    yolo_metrics: bool
    ignore_rules: IgnoreRules

    def score(self, images: Sequence[ImageResult], *, names: Sequence[str], max_det: int) -> ProtocolResult:
        """Score `images` (class ids index `names`); `max_det` is the most detections per image kept."""
        ...

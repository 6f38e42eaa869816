"""AP50 by object size: how much of a model's score comes from small objects.

An object's size is the square root of its box area in original-image pixels (COCO measures area, sqrt(32 x 32)
is its `small` bound); the bins are `SIZE_BINS`: under 16 px (VisDrone's tiny objects), 16 to 32 px and larger.
Each bin is scored as COCO scores an area range: the objects outside it are neither hit nor miss, so a detection
that overlaps (IoU >= 0.5) objects of its class outside the bin only is left out, and so is a detection that
overlaps none and whose own size is outside the bin; the rest is YOLO's AP50 (`tphyolo.metrics.yolo`) over the
classes with objects in the bin. A bin without objects has no AP (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.yolo import summarize
from tphyolo.ops.boxes import box_iou

# name -> [low, high) of sqrt(box area), original-image pixels
SIZE_BINS: dict[str, tuple[float, float]] = {"<16px": (0.0, 16.0), "16-32px": (16.0, 32.0), ">32px": (32.0, 1e9)}
MATCH_IOU = 0.5


def box_sizes(boxes: torch.Tensor) -> torch.Tensor:
    """(n, 4) xyxy -> (n,) sqrt of the area (0 for boxes without area)."""
    return ((boxes[:, 2] - boxes[:, 0]).clamp(min=0) * (boxes[:, 3] - boxes[:, 1]).clamp(min=0)).sqrt()


def in_bin(image: ImageResult, low: float, high: float) -> ImageResult:
    """`image` with only the objects whose size is in [low, high) and the detections that bin scores (see the
    module docstring); boxes come back xyxy."""
    boxes, dets = image.boxes_as("xyxy", "boxes").float(), image.detections.float()
    det_boxes = image.boxes_as("xyxy", "detections").float()
    inside = (box_sizes(boxes) >= low) & (box_sizes(boxes) < high)
    overlaps = (box_iou(det_boxes, boxes) >= MATCH_IOU) & (dets[:, 5:6] == image.classes[None, :].float())
    det_size = box_sizes(det_boxes)
    keep_det = (overlaps & inside[None, :]).any(1) | (~overlaps.any(1) & (det_size >= low) & (det_size < high))
    detections = torch.cat([det_boxes, dets[:, 4:]], dim=1)[keep_det]
    return replace(image, detections=detections, classes=image.classes[inside], boxes=boxes[inside],
                   crowd=None, box_format="xyxy")  # fmt: skip


def size_bin_ap50(images: Sequence[ImageResult], *, nc: int) -> dict[str, float | None]:
    """{bin name: AP50 (fraction) of the objects in that size bin, None when the images hold none}, in
    `SIZE_BINS` order."""
    scores: dict[str, float | None] = {}
    for name, (low, high) in SIZE_BINS.items():
        binned = [in_bin(image, low, high) for image in images]
        has_objects = any(len(image.classes) for image in binned)
        scores[name] = summarize(binned, nc=nc).map50 if has_objects else None
    return scores

"""Box operations: conversions, overlaps, non-maximum suppression, weighted boxes fusion."""

from tphyolo.ops.boxes import (
    box_area,
    box_iou,
    clip_boxes,
    scale_boxes_from_letterbox,
    xywh_to_xyxy,
    xyxy_to_xywh,
)
from tphyolo.ops.nms import non_max_suppression

__all__ = [
    "box_area",
    "box_iou",
    "clip_boxes",
    "non_max_suppression",
    "scale_boxes_from_letterbox",
    "xywh_to_xyxy",
    "xyxy_to_xywh",
]

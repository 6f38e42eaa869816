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
from tphyolo.ops.wbf import weighted_boxes_fusion

__all__ = [
    "box_area",
    "box_iou",
    "clip_boxes",
    "non_max_suppression",
    "scale_boxes_from_letterbox",
    "weighted_boxes_fusion",
    "xywh_to_xyxy",
    "xyxy_to_xywh",
]

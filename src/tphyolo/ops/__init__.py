"""Box operations: conversions, overlaps, non-maximum suppression, weighted boxes fusion; `Detections`."""

from tphyolo.ops.boxes import (
    BOX_FORMATS,
    box_area,
    box_convert,
    box_iou,
    clip_boxes,
    cxcywh_to_xyxy,
    unletterbox,
    xywh_to_xyxy,
    xyxy_to_cxcywh,
    xyxy_to_xywh,
)
from tphyolo.ops.detections import Detections
from tphyolo.ops.nms import non_max_suppression
from tphyolo.ops.wbf import weighted_boxes_fusion

__all__ = [
    "BOX_FORMATS",
    "Detections",
    "box_area",
    "box_convert",
    "box_iou",
    "clip_boxes",
    "cxcywh_to_xyxy",
    "non_max_suppression",
    "unletterbox",
    "weighted_boxes_fusion",
    "xywh_to_xyxy",
    "xyxy_to_cxcywh",
    "xyxy_to_xywh",
]

"""Box conversions and overlaps on torch tensors.

Boxes are (..., 4) tensors; xyxy is (x1, y1, x2, y2) with x2 >= x1, y2 >= y1; xywh is (centre x, centre y,
width, height). Units are whatever the caller uses (pixels or normalised); conversions keep them.
"""

from __future__ import annotations

import torch
from torchvision.ops import box_iou as _tv_box_iou


def xywh_to_xyxy(boxes: torch.Tensor) -> torch.Tensor:
    """(..., 4) centre x, centre y, width, height -> (..., 4) x1, y1, x2, y2."""
    centre, half = boxes[..., :2], boxes[..., 2:4] / 2
    return torch.cat((centre - half, centre + half), dim=-1)


def xyxy_to_xywh(boxes: torch.Tensor) -> torch.Tensor:
    """(..., 4) x1, y1, x2, y2 -> (..., 4) centre x, centre y, width, height."""
    lo, hi = boxes[..., :2], boxes[..., 2:4]
    return torch.cat(((lo + hi) / 2, hi - lo), dim=-1)


def box_area(boxes: torch.Tensor) -> torch.Tensor:
    """(..., 4) xyxy -> (...,) areas."""
    return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])


def box_iou(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    """IoU of every pair: (N, 4) xyxy and (M, 4) xyxy -> (N, M)."""
    return _tv_box_iou(boxes1, boxes2)


def clip_boxes(boxes: torch.Tensor, *, width: float, height: float) -> torch.Tensor:
    """(..., 4) xyxy clipped to the image [0, width] x [0, height]; returns a new tensor."""
    limit = boxes.new_tensor([width, height, width, height])
    return torch.minimum(boxes.clamp(min=0), limit)


def scale_boxes_from_letterbox(
    boxes: torch.Tensor, *, gain: float, pad: tuple[float, float], width: float, height: float
) -> torch.Tensor:
    """(..., 4) xyxy in a letterboxed network input -> xyxy in the original width x height image.

    `gain` is network pixels per original pixel; `pad` is the (left, top) padding in network pixels.
    """
    offset = boxes.new_tensor([pad[0], pad[1], pad[0], pad[1]])
    return clip_boxes((boxes - offset) / gain, width=width, height=height)

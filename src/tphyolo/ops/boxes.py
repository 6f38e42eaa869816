"""The box vocabulary: conversions, overlaps, clipping and the inverse of letterboxing.

Formats are named as torchvision's `box_convert` names them:

- `xyxy`: (x1, y1, x2, y2), top-left and bottom-right corners, x2 >= x1, y2 >= y1;
- `xywh`: (x1, y1, width, height), top-left corner and size (VisDrone and COCO files);
- `cxcywh`: (centre x, centre y, width, height) (YOLO labels and the detection head).

The conversions take torch tensors of shape (..., 4) and return tensors of the same shape and dtype, or
numpy arrays, returned as (n, 4) float64 (an empty list of boxes becomes (0, 4)). Units are whatever the
caller uses (pixels or normalised); conversions keep them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torchvision.ops import box_iou as _tv_box_iou

from tphyolo.errors import InputError

BOX_FORMATS = ("xyxy", "xywh", "cxcywh")


def _split(boxes):
    """(array, first two columns, last two columns, concatenate) for a tensor or an array-like."""
    if isinstance(boxes, torch.Tensor):
        return boxes, boxes[..., :2], boxes[..., 2:4], lambda parts: torch.cat(parts, dim=-1)
    array = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    return array, array[:, :2], array[:, 2:4], lambda parts: np.concatenate(parts, axis=1)


def cxcywh_to_xyxy(boxes):
    """centre x, centre y, width, height -> x1, y1, x2, y2."""
    _, centre, size, cat = _split(boxes)
    return cat((centre - size / 2, centre + size / 2))


def xyxy_to_cxcywh(boxes):
    """x1, y1, x2, y2 -> centre x, centre y, width, height."""
    _, lo, hi, cat = _split(boxes)
    return cat(((lo + hi) / 2, hi - lo))


def xywh_to_xyxy(boxes):
    """x1, y1, width, height (top-left corner) -> x1, y1, x2, y2."""
    _, lo, size, cat = _split(boxes)
    return cat((lo, lo + size))


def xyxy_to_xywh(boxes):
    """x1, y1, x2, y2 -> x1, y1, width, height (top-left corner)."""
    _, lo, hi, cat = _split(boxes)
    return cat((lo, hi - lo))


_TO_XYXY = {"xyxy": lambda b: b, "xywh": xywh_to_xyxy, "cxcywh": cxcywh_to_xyxy}
_FROM_XYXY = {"xyxy": lambda b: b, "xywh": xyxy_to_xywh, "cxcywh": xyxy_to_cxcywh}


def box_convert(boxes, in_fmt: str, out_fmt: str):
    """Convert between any two of BOX_FORMATS (as torchvision.ops.box_convert, for tensors and arrays)."""
    for fmt in (in_fmt, out_fmt):
        if fmt not in BOX_FORMATS:
            raise InputError(f"unknown box format {fmt!r}; known: {list(BOX_FORMATS)}")
    return _FROM_XYXY[out_fmt](_TO_XYXY[in_fmt](boxes))


def box_area(boxes: torch.Tensor) -> torch.Tensor:
    """(..., 4) xyxy -> (...,) areas."""
    return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])


def box_iou(boxes1, boxes2):
    """IoU of every pair: (N, 4) xyxy and (M, 4) xyxy -> (N, M); tensors give a tensor, two float32 numpy arrays
    a float32 array (half the memory traffic, for callers that need speed more than digits), anything else
    (numpy arrays, lists) a float64 array. Boxes without area have IoU 0 with everything."""
    if isinstance(boxes1, torch.Tensor):
        return _tv_box_iou(boxes1, boxes2)
    single = all(isinstance(b, np.ndarray) and b.dtype == np.float32 for b in (boxes1, boxes2))
    dtype = np.float32 if single else np.float64
    a = np.asarray(boxes1, dtype=dtype).reshape(-1, 4)
    b = np.asarray(boxes2, dtype=dtype).reshape(-1, 4)
    inter = np.minimum(a[:, None, 2], b[None, :, 2])  # (N, M), computed in place from here on
    inter -= np.maximum(a[:, None, 0], b[None, :, 0])
    np.maximum(inter, 0.0, out=inter)
    height = np.minimum(a[:, None, 3], b[None, :, 3])
    height -= np.maximum(a[:, None, 1], b[None, :, 1])
    np.maximum(height, 0.0, out=height)
    inter *= height
    area_a = np.maximum(a[:, 2] - a[:, 0], 0.0) * np.maximum(a[:, 3] - a[:, 1], 0.0)
    area_b = np.maximum(b[:, 2] - b[:, 0], 0.0) * np.maximum(b[:, 3] - b[:, 1], 0.0)
    union = area_a[:, None] + area_b[None, :]
    union -= inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def clip_boxes(boxes: torch.Tensor, *, width: float, height: float) -> torch.Tensor:
    """(..., 4) xyxy clipped to the image [0, width] x [0, height]; returns a new tensor."""
    limit = boxes.new_tensor([width, height, width, height])
    return torch.minimum(boxes.clamp(min=0), limit)


def unletterbox(
    boxes: torch.Tensor,
    *,
    ratio: Sequence[float],
    pad: Sequence[float],
    width: float,
    height: float,
    offset: Sequence[float] = (0.0, 0.0),
) -> torch.Tensor:
    """(..., 4) xyxy in a letterboxed network input -> float32 xyxy in the original image; the only place
    that undoes a letterbox.

    `ratio` = (rx, ry) network pixels per original pixel on each axis and `pad` = (left, top) padding in
    network pixels, as `tphyolo.data.letterbox.LetterboxInfo` records them. The result is clipped to the
    width x height region that was letterboxed, then shifted by `offset` = (x, y): the region's top-left
    corner in the full image (a slicing window), (0, 0) for a whole image.
    """
    boxes = boxes.float()
    rx, ry = (float(r) for r in ratio)
    left, top = (float(p) for p in pad)
    mapped = (boxes - boxes.new_tensor([left, top, left, top])) / boxes.new_tensor([rx, ry, rx, ry])
    x0, y0 = (float(o) for o in offset)
    return clip_boxes(mapped, width=width, height=height) + boxes.new_tensor([x0, y0, x0, y0])

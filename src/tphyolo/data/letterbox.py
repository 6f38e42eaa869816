"""Letterboxing: resize keeping the aspect ratio, then pad to a target shape with grey 114.

A point (x0, y0) of the source image lands at (x0 * rx + left, y0 * ry + top) in the letterboxed image,
and maps back with x0 = (x - left) / rx (`tphyolo.ops.boxes.unletterbox`). `rx`, `ry` are the exact per-axis
ratios of the resized size (integer pixels) to the source size, `left`, `top` the integer padding applied.
An image of any aspect ratio fits: the resized sides are at least 1 pixel (a 20000 x 20 image in a 640 square
becomes 640 x 1, padded).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import cv2
import numpy as np

from tphyolo.data.files.image_limits import MAX_IMGSZ
from tphyolo.errors import InputError

PAD_VALUE = 114
LOGGER = logging.getLogger("tphyolo")


def check_imgsz(imgsz: int, stride: int) -> int:
    """The image size to use for a requested `imgsz` and a model's largest `stride`: the policy everywhere
    (train, val, predict, export, bench). A multiple of `stride` is kept; another size is rounded up to the next
    multiple, with a warning. Raises ValueError for a size below 1 or above MAX_IMGSZ."""
    if not 1 <= imgsz <= MAX_IMGSZ:
        raise InputError(f"image size must be 1 to {MAX_IMGSZ} pixels, got {imgsz}")
    size = math.ceil(imgsz / stride) * stride
    if size != imgsz:
        LOGGER.warning("image size %d is not a multiple of the largest stride %d; using %d", imgsz, stride, size)
    return size


@dataclass(frozen=True)
class LetterboxInfo:
    """ratio = (rx, ry) resized / source size per axis; pad = (left, top) pixels added before the image."""

    ratio: tuple[float, float]
    pad: tuple[int, int]


def letterbox_shape(
    height: int, width: int, new_shape: int | tuple[int, int], *, stride: int = 32, auto: bool = False,
    scaleup: bool = True,
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((h, w) of the resized image, (h, w) of the letterboxed output) for a height x width image given to
    `letterbox` with the same arguments: the geometry alone, without the pixels."""
    new_h, new_w = (new_shape, new_shape) if isinstance(new_shape, int) else new_shape
    r = min(new_h / height, new_w / width)
    if not scaleup:
        r = min(r, 1.0)
    h1, w1 = max(1, round(height * r)), max(1, round(width * r))
    dh, dw = new_h - h1, new_w - w1
    if auto:  # pad to the next stride multiple only
        dh, dw = dh % stride, dw % stride
    return (h1, w1), (h1 + dh, w1 + dw)


def letterbox(
    image: np.ndarray,
    new_shape: int | tuple[int, int],
    *,
    stride: int = 32,
    auto: bool = False,
    scaleup: bool = True,
    color: int = PAD_VALUE,
) -> tuple[np.ndarray, LetterboxInfo]:
    """Fit `image` (H, W, 3) into `new_shape` (h, w) (an int means square).

    auto=True pads only up to the next multiple of `stride` (minimum rectangle) instead of the full shape;
    scaleup=False never enlarges (better mAP on validation, as upscaling invents no detail).
    Returns the letterboxed image and how to map coordinates (see module docstring).
    """
    h0, w0 = image.shape[:2]
    (h1, w1), (h, w) = letterbox_shape(h0, w0, new_shape, stride=stride, auto=auto, scaleup=scaleup)
    dw, dh = w - w1, h - h1
    if (w1, h1) != (w0, h0):
        image = cv2.resize(image, (w1, h1), interpolation=cv2.INTER_LINEAR)
    left, top = round(dw / 2 - 0.1), round(dh / 2 - 0.1)
    right, bottom = dw - left, dh - top
    if dw or dh:
        image = cv2.copyMakeBorder(image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(color,) * 3)
    return image, LetterboxInfo((w1 / w0, h1 / h0), (left, top))


def map_boxes(boxes: np.ndarray, info: LetterboxInfo) -> np.ndarray:
    """(n, 4) xyxy in source pixels -> (n, 4) xyxy in letterboxed pixels."""
    rx, ry = info.ratio
    left, top = info.pad
    return boxes * np.array([rx, ry, rx, ry], dtype=np.float32) + np.array([left, top, left, top], np.float32)

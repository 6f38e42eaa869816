"""Test-time augmentation: run a network input at several scales and flips, and map each pass's boxes back.

A pass (scale s, flip f) resizes the input batch (B, 3, H, W) to (round(H*s), round(W*s)), pads it on the
right and bottom to a multiple of the model's largest stride with grey 114/255, flips it, and runs the
model. `unaugment` turns the pass's eval output (B, N, 5 + nc), xywh in the pass's pixels, back into the
pixels of the un-augmented input. The pass (1.0, "none") is the plain input, unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tphyolo.data.letterbox import PAD_VALUE


@dataclass(frozen=True)
class PassGeometry:
    """How a pass changed the input: per-axis resize ratios (new / old size) and the pass's padded size."""

    ratio: tuple[float, float]
    size: tuple[int, int]  # (height, width) of the tensor the model saw
    flip: str


def augment(x: torch.Tensor, *, scale: float, flip: str, stride: int) -> tuple[torch.Tensor, PassGeometry]:
    """(B, 3, H, W) input in [0, 1] -> the pass's input (B, 3, H', W'), H' and W' multiples of `stride`."""
    _, _, h, w = x.shape
    new_h, new_w = max(1, round(h * scale)), max(1, round(w * scale))
    if (new_h, new_w) != (h, w):
        x = F.interpolate(x, size=(new_h, new_w), mode="bilinear", align_corners=False)
    pad_h, pad_w = math.ceil(new_h / stride) * stride - new_h, math.ceil(new_w / stride) * stride - new_w
    if pad_h or pad_w:
        x = F.pad(x, (0, pad_w, 0, pad_h), value=PAD_VALUE / 255.0)
    if flip == "lr":
        x = x.flip(-1)
    elif flip == "ud":
        x = x.flip(-2)
    return x, PassGeometry((new_w / w, new_h / h), (x.shape[2], x.shape[3]), flip)


def unaugment(prediction: torch.Tensor, geometry: PassGeometry) -> torch.Tensor:
    """A pass's eval output (B, N, 5 + nc), xywh in the pass's pixels -> a copy in the original input's pixels."""
    out = prediction.clone()
    height, width = geometry.size
    if geometry.flip == "lr":
        out[..., 0] = width - out[..., 0]
    elif geometry.flip == "ud":
        out[..., 1] = height - out[..., 1]
    rx, ry = geometry.ratio
    out[..., 0:4] /= out.new_tensor([rx, ry, rx, ry])
    return out

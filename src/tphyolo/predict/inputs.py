"""In-memory prediction inputs: numpy arrays, PIL images and torch tensors, made the uint8 BGR (H, W, 3) arrays
the predictor reads.

- numpy: (H, W, 3) uint8, BGR as OpenCV reads images, or RGB when the caller says so (`rgb=True`).
- PIL: any mode PIL converts to RGB.
- torch: (3, H, W) or (B, 3, H, W), RGB as torchvision reads images, uint8 in [0, 255] or floating point in
  [0, 1] (rounded to uint8).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tphyolo.errors import InputError


def _from_array(image: np.ndarray, *, rgb: bool, where: str) -> np.ndarray:
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise InputError(f"{where}: expected uint8 (H, W, 3), got {image.dtype} {image.shape}")
    return np.ascontiguousarray(image[:, :, ::-1] if rgb else image)


def _from_tensor(image: torch.Tensor, *, where: str) -> list[np.ndarray]:
    if image.ndim == 3:
        image = image[None]
    if image.ndim != 4 or image.shape[1] != 3:
        raise InputError(f"{where}: expected a (3, H, W) or (B, 3, H, W) RGB tensor, got shape {tuple(image.shape)}")
    image = image.detach().cpu()
    if image.is_floating_point():
        if image.numel() and (image.min() < 0 or image.max() > 1):
            raise InputError(f"{where}: a floating-point tensor must hold values in [0, 1]")
        image = (image * 255).round().to(torch.uint8)
    elif image.dtype != torch.uint8:
        raise InputError(f"{where}: expected a uint8 or floating-point tensor, got {image.dtype}")
    bgr = image.flip(1).permute(0, 2, 3, 1).numpy()  # RGB -> BGR, (B, H, W, 3)
    return [np.ascontiguousarray(x) for x in bgr]


def _is_in_memory(item: Any) -> bool:
    return isinstance(item, (np.ndarray, torch.Tensor)) or type(item).__module__.startswith("PIL.")


def in_memory_images(source: Any, *, rgb: bool = False) -> list[np.ndarray] | None:
    """The uint8 BGR (H, W, 3) images of an in-memory `source` (one image, a batch tensor, or a list of them;
    see the module docstring), or None when `source` names files (a path, pattern, URL or a list of them).
    `rgb` says numpy arrays are RGB. Raises ValueError naming the input for a shape or type it cannot read,
    and for a list that mixes images with paths."""
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    in_memory = [_is_in_memory(item) for item in items]
    if not items or not any(in_memory):
        return None
    if not all(in_memory):
        kinds = sorted({type(item).__name__ for item in items})
        raise InputError(f"a source list holds either images or paths, got {', '.join(kinds)}")
    images: list[np.ndarray] = []
    for i, item in enumerate(items):
        where = f"input {i}"
        if isinstance(item, np.ndarray):
            images.append(_from_array(item, rgb=rgb, where=where))
        elif isinstance(item, torch.Tensor):
            images += _from_tensor(item, where=where)
        else:
            images.append(_from_array(np.asarray(item.convert("RGB")), rgb=True, where=where))
    return images

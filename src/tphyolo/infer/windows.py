"""From images to the views the inference core runs: windows cut (`slicing`), empty ones skipped, letterboxed
and batched -- one place for prediction and sliced validation.

    windows = image_windows(images, slicing)                 # [Window]: each view's image and pixel box
    batches = view_batches(images, windows, detector=detector, imgsz=640, batch=8)
    rows = detector(batches, owners=[w.owner for w in windows], sizes=sizes, images=images)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tphyolo.data.letterbox import LetterboxInfo, letterbox
from tphyolo.infer.detector import Detector, View, ViewBatch
from tphyolo.infer.slicing import SliceConfig, slice_windows


@dataclass(frozen=True)
class Window:
    """One view to run: image `owner`'s region `box` (x1, y1, x2, y2) in its pixels, keeping only boxes whose
    longer side is at least `min_size` pixels (the full-image pass of `SliceConfig.full_min`)."""

    owner: int
    box: tuple[int, int, int, int]
    min_size: float = 0.0


def is_blank(region: np.ndarray) -> bool:
    """Whether every pixel of `region` has one and the same value (a blank or NoData window)."""
    return region.size == 0 or bool(region.min() == region.max())


def image_windows(images: Sequence[np.ndarray], slicing: SliceConfig | None) -> list[Window]:
    """The windows of (H, W, C) `images`, image by image: the whole image without `slicing`, else its slicing
    windows (an AUTO size must be `resolved`), less the blank ones with `slicing.skip_empty`."""
    windows = []
    for i, image in enumerate(images):
        h, w = image.shape[:2]
        if slicing is None:
            windows.append(Window(i, (0, 0, w, h)))
            continue
        boxes = slice_windows(h, w, slicing)
        for x1, y1, x2, y2 in boxes:
            if slicing.skip_empty and is_blank(image[y1:y2, x1:x2]):
                continue
            whole = len(boxes) > 1 and (x1, y1, x2, y2) == (0, 0, w, h)
            windows.append(Window(i, (x1, y1, x2, y2), float(slicing.full_min) if whole else 0.0))
    return windows


def letterbox_view(image: np.ndarray, *, detector: Detector, imgsz: int) -> tuple[np.ndarray, LetterboxInfo]:
    """`image` letterboxed for `detector`: to the shape of a fixed-size export, padded the whole way, else to
    `imgsz` with the short side padded to the next stride multiple."""
    if detector.fixed_shape is not None:
        return letterbox(image, detector.fixed_shape, stride=detector.stride, auto=False)
    return letterbox(image, imgsz, stride=detector.stride, auto=True)


def view_batches(
    images: Sequence[np.ndarray], windows: Sequence[Window], *, detector: Detector, imgsz: int, batch: int
) -> Iterator[ViewBatch]:
    """Every window of uint8 BGR `images` letterboxed and prepared, in batches of at most `batch` views of one
    shape; view ids are the windows' positions."""
    boxed = []
    for window in windows:
        x1, y1, x2, y2 = window.box
        crop, info = letterbox_view(images[window.owner][y1:y2, x1:x2], detector=detector, imgsz=imgsz)
        boxed.append((crop, View.of(info, x2 - x1, y2 - y1, offset=(x1, y1), min_size=window.min_size)))
    by_shape: dict[tuple[int, ...], list[int]] = {}
    for v, (crop, _) in enumerate(boxed):
        by_shape.setdefault(crop.shape, []).append(v)
    for members in by_shape.values():
        for start in range(0, len(members), batch):
            chunk = members[start : start + batch]
            array = np.stack([boxed[v][0] for v in chunk])[..., ::-1].transpose(0, 3, 1, 2)  # BGR -> RGB, NCHW
            x = detector.prepare(torch.from_numpy(np.ascontiguousarray(array)))  # (B, 3, H, W)
            yield ViewBatch(x, [boxed[v][1] for v in chunk], chunk)

"""Crops of objects from original-resolution images, for training and applying the crop classifier.

A box (x1, y1, x2, y2) in original pixels becomes its context region (x1 - c w, y1 - c h, x2 + c w, y2 + c h)
with c = `context` and w, h the box size, clipped to the image border. The region's pixels (rounded outward
to whole pixels) are warped to size x size: the aspect ratio is not kept, as in R-CNN's warped crops; area
interpolation when shrinking, bilinear when enlarging. `cut_crops` is the one function that does this, for
validation crops, for training crops (through `ObjectPatch`) and for re-classifying detections.

From dataset records (`tphyolo.data.scan.Record`), only objects of the classifier's classes whose box is at
least `min_side` pixels on both sides are taken; ignore regions are never crops. Images are decoded with
`tphyolo.data.files.image_io.read_image`, once per image.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import cv2
import numpy as np

from tphyolo.classify.config import MIN_BOX_SIDE
from tphyolo.data.files.image_io import read_image
from tphyolo.data.scan import Record

PIXEL_TOLERANCE = 1e-3  # pixels: region edges this close to a whole pixel count as on it


def context_regions(boxes: np.ndarray, *, context: float, width: int, height: int) -> np.ndarray:
    """(N, 4) xyxy boxes -> (N, 4) float32 xyxy regions grown by `context` of the box size on each side and
    clipped to the width x height image."""
    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    size = boxes[:, 2:] - boxes[:, :2]  # (N, 2) w, h
    regions = np.concatenate([boxes[:, :2] - context * size, boxes[:, 2:] + context * size], axis=1)
    return np.clip(regions, 0, np.array([width, height, width, height], dtype=np.float32))


def pixel_bounds(region: np.ndarray, *, width: int, height: int) -> tuple[int, int, int, int]:
    """Whole-pixel bounds (x1, y1, x2, y2) covering `region` (rounded outward, ignoring float noise below
    PIXEL_TOLERANCE, e.g. from normalised YOLO coordinates), at least one pixel wide."""
    x1 = min(int(math.floor(region[0] + PIXEL_TOLERANCE)), width - 1)
    y1 = min(int(math.floor(region[1] + PIXEL_TOLERANCE)), height - 1)
    x2 = max(int(math.ceil(region[2] - PIXEL_TOLERANCE)), x1 + 1)
    y2 = max(int(math.ceil(region[3] - PIXEL_TOLERANCE)), y1 + 1)
    return max(0, x1), max(0, y1), min(width, x2), min(height, y2)


def cut_crops(image: np.ndarray, regions: np.ndarray, *, size: int) -> np.ndarray:
    """uint8 (H, W, 3) image and (N, 4) xyxy regions inside it -> (N, size, size, 3) uint8 warped crops."""
    height, width = image.shape[:2]
    out = np.empty((len(regions), size, size, 3), dtype=np.uint8)
    for i, region in enumerate(np.asarray(regions, dtype=np.float32).reshape(-1, 4)):
        x1, y1, x2, y2 = pixel_bounds(region, width=width, height=height)
        patch = image[y1:y2, x1:x2]
        shrink = patch.shape[0] >= size and patch.shape[1] >= size
        out[i] = cv2.resize(patch, (size, size), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
    return out


def crop_objects(image: np.ndarray, boxes: np.ndarray, *, context: float, size: int) -> np.ndarray:
    """(N, size, size, 3) uint8 crops of the (N, 4) xyxy `boxes` of `image`, with context (module docstring)."""
    height, width = image.shape[:2]
    return cut_crops(image, context_regions(boxes, context=context, width=width, height=height), size=size)


def selected_objects(record: Record, class_ids: Sequence[int], *, min_side: float) -> tuple[np.ndarray, np.ndarray]:
    """(boxes (K, 4), labels (K,)) of the record's objects of `class_ids` at least `min_side` px on both sides;
    labels index into `class_ids`."""
    lookup = np.full(max(max(class_ids, default=0), int(record.labels.classes.max(initial=0))) + 1, -1)
    lookup[list(class_ids)] = np.arange(len(class_ids))
    labels = lookup[record.labels.classes]
    boxes = record.labels.boxes
    sides = (boxes[:, 2:] - boxes[:, :2]).min(1) if len(boxes) else np.zeros(0)
    keep = (labels >= 0) & (sides >= min_side)
    return boxes[keep], labels[keep].astype(np.int64)


@dataclass(frozen=True)
class CropSet:
    """Ready crops of a split: crops (N, size, size, 3) uint8 BGR, labels (N,) int64 indices into the
    classifier's classes, and for each crop the image it came from."""

    crops: np.ndarray
    labels: np.ndarray
    files: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class ObjectPatch:
    """An object with room around it for crop jitter: pixels (h, w, 3) uint8 BGR cut from the image (clipped
    to its border, possibly downscaled), box (4,) float32 xyxy of the object in patch pixels, its label."""

    pixels: np.ndarray
    box: np.ndarray
    label: int


def _per_record(records: Sequence[Record], work: Callable[[Record], list], *, workers: int | None) -> list[list]:
    with ThreadPoolExecutor(max_workers=workers or min(8, os.cpu_count() or 1)) as pool:
        return list(pool.map(work, records))


def extract_crops(
    records: Sequence[Record],
    class_ids: Sequence[int],
    *,
    context: float,
    size: int,
    min_side: float = MIN_BOX_SIDE,
    workers: int | None = None,
) -> CropSet:
    """The crops `cut_crops` gives for every selected object of `records` (what inference would classify)."""

    def work(record: Record) -> list:
        boxes, labels = selected_objects(record, class_ids, min_side=min_side)
        if not len(boxes):
            return []
        crops = crop_objects(read_image(record.im_file), boxes, context=context, size=size)
        return [(crop, int(label), record.im_file) for crop, label in zip(crops, labels, strict=True)]

    items = [item for chunk in _per_record(records, work, workers=workers) for item in chunk]
    crops = np.stack([c for c, _, _ in items]) if items else np.zeros((0, size, size, 3), np.uint8)
    return CropSet(crops, np.array([lb for _, lb, _ in items], np.int64), tuple(f for _, _, f in items))


def extract_patches(
    records: Sequence[Record],
    class_ids: Sequence[int],
    *,
    margin: float,
    max_side: int,
    min_side: float = MIN_BOX_SIDE,
    workers: int | None = None,
) -> list[ObjectPatch]:
    """Patches of every selected object of `records`: the box grown by `margin` of its size on each side,
    clipped to the image, downscaled (area) when its long side exceeds `max_side` pixels."""

    def work(record: Record) -> list:
        boxes, labels = selected_objects(record, class_ids, min_side=min_side)
        if not len(boxes):
            return []
        image = read_image(record.im_file)
        height, width = image.shape[:2]
        out = []
        for box, label, region in zip(
            boxes, labels, context_regions(boxes, context=margin, width=width, height=height), strict=True
        ):
            x1, y1, x2, y2 = pixel_bounds(region, width=width, height=height)
            pixels = image[y1:y2, x1:x2]
            h, w = pixels.shape[:2]
            scale = min(1.0, max_side / max(h, w))
            new_w, new_h = max(1, round(w * scale)), max(1, round(h * scale))
            if (new_w, new_h) != (w, h):
                pixels = cv2.resize(pixels, (new_w, new_h), interpolation=cv2.INTER_AREA)
            local = (box - np.array([x1, y1, x1, y1], np.float32)) * np.array([new_w / w, new_h / h] * 2, np.float32)
            out.append(ObjectPatch(np.ascontiguousarray(pixels), local.astype(np.float32), int(label)))
        return out

    return [patch for chunk in _per_record(records, work, workers=workers) for patch in chunk]

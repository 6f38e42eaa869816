"""In-memory labels of one image, shared by every on-disk format.

Coordinates are pixels of the image as displayed (EXIF orientation applied), boxes are xyxy with (0, 0) the
top-left corner of the top-left pixel: a box covering pixel columns 10..19 has x1 = 10, x2 = 20. Box format
conversions are `tphyolo.ops.boxes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


def empty_boxes() -> np.ndarray:
    return np.zeros((0, 4), dtype=np.float32)


@dataclass
class ImageLabels:
    """Objects and ignore regions of one image.

    classes: (n,) int64 class ids in [0, nc); boxes: (n, 4) float32 xyxy pixels;
    ignore: (k, 4) float32 xyxy pixels of regions that are neither positives nor negatives.
    """

    classes: np.ndarray = field(default_factory=lambda: np.zeros((0,), dtype=np.int64))
    boxes: np.ndarray = field(default_factory=empty_boxes)
    ignore: np.ndarray = field(default_factory=empty_boxes)

    def __post_init__(self) -> None:
        self.classes = np.asarray(self.classes, dtype=np.int64).reshape(-1)
        self.boxes = np.asarray(self.boxes, dtype=np.float32).reshape(-1, 4)
        self.ignore = np.asarray(self.ignore, dtype=np.float32).reshape(-1, 4)
        if len(self.classes) != len(self.boxes):
            raise ValueError(f"{len(self.classes)} classes for {len(self.boxes)} boxes")


class LabelError(ValueError):
    """A label file that cannot be used; the message names the file, the line and the problem."""


def read_label_text(path: Path) -> str:
    """The text of label file `path`: UTF-8, a leading byte-order mark (as some editors write) dropped."""
    return Path(path).read_text(encoding="utf-8-sig")


def finite_numbers(fields: list[str], where: str, line: str) -> list[float]:
    """`fields` as floats; raises LabelError prefixed by `where` (file:line) for a non-number or NaN/inf."""
    try:
        values = [float(f) for f in fields]
    except ValueError:
        raise LabelError(f"{where}: not a number in {line.strip()!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise LabelError(f"{where}: non-finite value in {line.strip()!r}")
    return values


def sanitize(labels: ImageLabels, *, width: int, height: int) -> tuple[ImageLabels, list[str]]:
    """Clip boxes and ignore regions to the width x height image, drop those left with no area, remove exact
    duplicate objects. Returns the cleaned labels and a note for each kind of change made."""
    notes = []
    limit = np.array([width, height, width, height], dtype=np.float32)

    def clip(b: np.ndarray) -> tuple[np.ndarray, int]:
        clipped = np.clip(b, 0, limit)
        return clipped, int((np.abs(clipped - b) > 1e-3).any(1).sum())

    boxes, n_clipped = clip(labels.boxes)
    ignore, n_ign_clipped = clip(labels.ignore)
    if n_clipped:
        notes.append(f"{n_clipped} box(es) outside the {width}x{height} image clipped")
    if n_ign_clipped:
        notes.append(f"{n_ign_clipped} ignore region(s) outside the image clipped")
    keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    if not keep.all():
        notes.append(f"{int((~keep).sum())} box(es) with zero size (after clipping) dropped")
    classes, boxes = labels.classes[keep], boxes[keep]
    ignore = ignore[(ignore[:, 2] > ignore[:, 0]) & (ignore[:, 3] > ignore[:, 1])]
    if len(boxes):
        rows = np.concatenate([classes[:, None].astype(np.float64), boxes.astype(np.float64)], axis=1)
        _, first = np.unique(rows, axis=0, return_index=True)
        if len(first) < len(rows):
            notes.append(f"{len(rows) - len(first)} duplicate box(es) removed")
            first = np.sort(first)
            classes, boxes = classes[first], boxes[first]
    return ImageLabels(classes, boxes, ignore), notes

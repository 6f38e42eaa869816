"""YOLO txt labels: `labels/STEM.txt` beside `images/STEM.jpg`, one `class cx cy w h` line per object,
coordinates normalised by the image width / height. Lines with more than 5 values are polygons
`class x1 y1 x2 y2 ...` (their enclosing box is used).

Ignore regions live in an optional side file `ignore/STEM.txt`, one normalised `cx cy w h` line each.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tphyolo.data.formats.base import LabeledImage, LabelEntry, LabelFormat, sibling_file
from tphyolo.data.labels import ImageLabels, LabelError, finite_numbers, read_label_text
from tphyolo.errors import InputError
from tphyolo.ops.boxes import cxcywh_to_xyxy, xyxy_to_cxcywh


def _rows(path: Path) -> list[tuple[int, list[float]]]:
    rows = []
    for n, line in enumerate(read_label_text(path).splitlines(), start=1):
        fields = line.split()
        if fields:
            rows.append((n, finite_numbers(fields, f"{path}:{n}", line)))
    return rows


def parse_yolo(label_path: Path, ignore_path: Path | None, *, width: int, height: int) -> ImageLabels:
    """Read a YOLO label file (and its ignore side file when it exists) into pixel xyxy for a width x height
    image. Raises LabelError naming the file and line for malformed lines, negative sizes, bad classes."""
    scale = np.array([width, height, width, height], dtype=np.float64)
    classes, boxes = [], []
    for n, values in _rows(label_path):
        cls = values[0]
        if cls != int(cls) or cls < 0:
            raise LabelError(f"{label_path}:{n}: class {cls:g} is not a non-negative integer")
        coords = values[1:]
        if len(coords) == 4:
            if coords[2] < 0 or coords[3] < 0:
                raise LabelError(f"{label_path}:{n}: negative box size {coords[2]:g}x{coords[3]:g}")
            box = cxcywh_to_xyxy(np.array(coords))[0]
        elif len(coords) >= 6 and len(coords) % 2 == 0:
            xy = np.array(coords).reshape(-1, 2)
            box = np.concatenate([xy.min(0), xy.max(0)])
        else:
            raise LabelError(f"{label_path}:{n}: expected 'class cx cy w h' or a polygon, got {len(values)} values")
        classes.append(int(cls))
        boxes.append(box * scale)
    ignore = []
    if ignore_path is not None and os.path.lexists(ignore_path):  # not a regular file: named by the reader
        for n, values in _rows(ignore_path):
            if len(values) != 4:
                raise LabelError(f"{ignore_path}:{n}: expected 'cx cy w h', got {len(values)} values")
            if values[2] < 0 or values[3] < 0:
                raise LabelError(f"{ignore_path}:{n}: negative region size {values[2]:g}x{values[3]:g}")
            ignore.append(cxcywh_to_xyxy(np.array(values))[0] * scale)
    return ImageLabels(classes, np.array(boxes), np.array(ignore))


def format_yolo(labels: ImageLabels, *, width: int, height: int) -> tuple[str, str]:
    """(label text, ignore text) for `labels` of a width x height image, normalised to 6 decimals."""
    scale = np.array([width, height, width, height], dtype=np.float64)
    boxes = xyxy_to_cxcywh(labels.boxes) / scale
    ignore = xyxy_to_cxcywh(labels.ignore) / scale
    label_text = "".join(
        f"{c} {b[0]:.6f} {b[1]:.6f} {b[2]:.6f} {b[3]:.6f}\n"
        for c, b in zip(labels.classes.tolist(), boxes, strict=True)
    )
    ignore_text = "".join(f"{b[0]:.6f} {b[1]:.6f} {b[2]:.6f} {b[3]:.6f}\n" for b in ignore)
    return label_text, ignore_text


class YoloFormat(LabelFormat):
    """`labels/STEM.txt` (+ `ignore/STEM.txt`) beside `images/STEM.jpg`; classes numbered by the dataset."""

    name = "yolo"

    def label_file(self, image: Path) -> Path | None:
        return sibling_file(image, "labels")

    def ignore_file(self, image: Path) -> Path | None:
        return sibling_file(image, "ignore")

    def read(self, entry: LabelEntry, *, width: int, height: int, num_classes: int,
             categories: tuple[int, ...] = ()) -> tuple[ImageLabels, list[str]]:  # fmt: skip
        return parse_yolo(entry.label, entry.ignore, width=width, height=height), []

    def write(self, images: Sequence[LabeledImage], *, names: Sequence[str]) -> list[Path]:
        """Label files for every image (in `labels/`, with an `ignore/` folder beside it); an ignore side file
        only for images with ignore regions (a stale one is removed)."""
        written = []
        for im in images:
            label, ignore = self.label_file(im.image), self.ignore_file(im.image)
            if label is None:
                raise InputError(f"{im.image}: not under an images/ folder, so it has no labels/ file")
            label_text, ignore_text = format_yolo(im.labels, width=im.width, height=im.height)
            label.parent.mkdir(parents=True, exist_ok=True)
            ignore.parent.mkdir(parents=True, exist_ok=True)
            label.write_text(label_text, encoding="utf-8")
            written.append(label)
            if ignore_text:
                ignore.write_text(ignore_text, encoding="utf-8")
                written.append(ignore)
            elif ignore.exists():
                ignore.unlink()
        return written

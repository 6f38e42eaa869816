"""VisDrone-DET original annotations: `annotations/STEM.txt` beside `images/STEM.jpg`.

One object per line: `left,top,width,height,score,category,truncation,occlusion` in pixels (trailing commas
and blank lines tolerated). Category 1..10 are the classes (class id = category - 1), category 0 marks an
ignored region (kept as an ignore region), category 11 "others" is neither (dropped).

`NAMES` and `NUM_CLASSES` are the one definition of VisDrone-DET's classes (the challenge protocol in
`tphyolo.metrics.visdrone` and `configs/data/visdrone.yaml` agree with them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tphyolo.data.formats.base import LabeledImage, LabelEntry, LabelFormat, sibling_file
from tphyolo.data.labels import ImageLabels, LabelError, finite_numbers, read_label_text
from tphyolo.errors import InputError
from tphyolo.ops.boxes import xywh_to_xyxy

IGNORED_CATEGORY = 0
NAMES = (
    "pedestrian", "people", "bicycle", "car", "van", "truck", "tricycle", "awning-tricycle", "bus", "motor",
)  # class id = category - 1  # fmt: skip
NUM_CLASSES = len(NAMES)  # categories 1..NUM_CLASSES are classes


WHOLE_COLUMNS = (5, 6, 7)  # category, truncation, occlusion


def read_visdrone_line(line: str, where: str, *, max_values: int | None = None) -> list[float] | None:
    """The values of one VisDrone line `left,top,width,height,score,category[,truncation,occlusion,...]`, or
    None for a blank line; trailing commas are tolerated. Raises LabelError prefixed by `where` (file:line) for
    an empty or non-numeric field, fewer than 6 (or more than `max_values`) values, a non-finite value, a
    negative width or height, or a category, truncation or occlusion that is not a whole number."""
    fields = [f.strip() for f in line.strip().split(",")]
    while fields and fields[-1] == "":
        fields.pop()
    if not fields:
        return None
    if len(fields) < 6 or (max_values is not None and len(fields) > max_values):
        expected = "at least 6" if max_values is None else f"6 to {max_values}"
        raise LabelError(f"{where}: expected {expected} comma-separated values, got {len(fields)}: {line!r}")
    if "" in fields:
        raise LabelError(f"{where}: field {fields.index('') + 1} is empty in {line!r}")
    values = finite_numbers(fields, where, line)
    if values[2] < 0 or values[3] < 0:
        raise LabelError(f"{where}: negative box size {values[2]:g}x{values[3]:g}")
    for i in WHOLE_COLUMNS[: len(values) - 5]:
        if values[i] != int(values[i]):
            raise LabelError(f"{where}: field {i + 1} (category, truncation, occlusion) {values[i]:g} is not whole")
    return values


def _category(values: list[float], where: str, *, num_classes: int) -> int:
    """The category of a line's values; LabelError prefixed by `where` when it is outside 0..num_classes + 1."""
    category = values[5]
    if not 0 <= category <= num_classes + 1:
        raise LabelError(f"{where}: category {category:g} outside 0..{num_classes + 1}")
    return int(category)


def read_visdrone_rows(path: Path, *, num_classes: int = NUM_CLASSES) -> np.ndarray:
    """(n, 8) float64 rows of a VisDrone txt file, annotations or results alike (missing truncation and
    occlusion read as 0), as `tphyolo eval` scores them. Raises LabelError naming the file and line of an
    unusable line (`read_visdrone_line`, at most 8 values) or a category outside 0..num_classes + 1, and
    naming the file when it is not UTF-8 text or not a regular file (`read_label_text`)."""
    rows = []
    for n, line in enumerate(read_label_text(path).splitlines(), start=1):
        values = read_visdrone_line(line, f"{path}:{n}", max_values=8)
        if values is not None:
            _category(values, f"{path}:{n}", num_classes=num_classes)
            rows.append(values + [0.0] * (8 - len(values)))
    return np.array(rows, dtype=np.float64).reshape(-1, 8)


def parse_visdrone(path: Path, *, num_classes: int = NUM_CLASSES, categories: Sequence[int] = ()) -> ImageLabels:
    """Read one annotation file. Raises LabelError naming the file and line for an unusable line.

    `num_classes` lets other VisDrone-format datasets use categories 1..num_classes; `num_classes + 1` is
    "others" (dropped) and anything above is an error. `categories` (a data set's `categories:` mapping: the
    category of each class) reads those numbers as the classes instead; other categories but 0 are dropped.
    """
    if categories:
        return _parse_mapped(path, {c: i for i, c in enumerate(categories)})
    classes, boxes, ignore = [], [], []
    text = read_label_text(path)
    for n, line in enumerate(text.splitlines(), start=1):
        values = read_visdrone_line(line, f"{path}:{n}")
        if values is None:
            continue
        left, top, width, height = values[:4]
        category = _category(values, f"{path}:{n}", num_classes=num_classes)
        if category == IGNORED_CATEGORY:
            ignore.append((left, top, width, height))
        elif category <= num_classes:
            classes.append(category - 1)
            boxes.append((left, top, width, height))
    return ImageLabels(classes, xywh_to_xyxy(np.array(boxes)), xywh_to_xyxy(np.array(ignore)))


def _parse_mapped(path: Path, class_of: dict[int, int]) -> ImageLabels:
    """`parse_visdrone` through an explicit category -> class mapping."""
    classes, boxes, ignore = [], [], []
    for n, line in enumerate(read_label_text(path).splitlines(), start=1):
        values = read_visdrone_line(line, f"{path}:{n}")
        if values is None:
            continue
        if values[5] < 0:
            raise LabelError(f"{path}:{n}: category {values[5]:g} is negative")
        category = int(values[5])
        if category == IGNORED_CATEGORY:
            ignore.append(tuple(values[:4]))
        elif category in class_of:
            classes.append(class_of[category])
            boxes.append(tuple(values[:4]))
    return ImageLabels(classes, xywh_to_xyxy(np.array(boxes)), xywh_to_xyxy(np.array(ignore)))


def format_visdrone(labels: ImageLabels, categories: Sequence[int] = ()) -> str:
    """Annotation text for `labels`: objects with score 1 under the category `categories[class]` (() = class
    + 1), ignore regions as category 0 (score 0)."""
    lines = []
    for x1, y1, x2, y2 in labels.ignore.tolist():
        lines.append(f"{_num(x1)},{_num(y1)},{_num(x2 - x1)},{_num(y2 - y1)},0,0,0,0")
    for c, (x1, y1, x2, y2) in zip(labels.classes.tolist(), labels.boxes.tolist(), strict=True):
        category = categories[c] if categories else c + 1
        lines.append(f"{_num(x1)},{_num(y1)},{_num(x2 - x1)},{_num(y2 - y1)},1,{category},0,0")
    return "".join(line + "\n" for line in lines)


def _num(v: float) -> str:
    """Integers without a decimal point (as in the original files), other values with 2 decimals."""
    r = round(v)
    return str(int(r)) if abs(v - r) < 1e-3 else f"{v:.2f}"


class VisDroneFormat(LabelFormat):
    """`annotations/STEM.txt` beside `images/STEM.jpg`; class names are VisDrone-DET's unless the dataset
    gives its own (then categories 1..nc)."""

    name = "visdrone"
    names = NAMES

    def label_file(self, image: Path) -> Path | None:
        return sibling_file(image, "annotations")

    def read(self, entry: LabelEntry, *, width: int, height: int, num_classes: int,
             categories: tuple[int, ...] = ()) -> tuple[ImageLabels, list[str]]:  # fmt: skip
        return parse_visdrone(entry.label, num_classes=num_classes or NUM_CLASSES, categories=categories), []

    def write(self, images: Sequence[LabeledImage], *, names: Sequence[str]) -> list[Path]:
        written = []
        for im in images:
            path = self.label_file(im.image)
            if path is None:
                raise InputError(f"{im.image}: not under an images/ folder, so it has no annotations/ file")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(format_visdrone(im.labels), encoding="utf-8")
            written.append(path)
        return written

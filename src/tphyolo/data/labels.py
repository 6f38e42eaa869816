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

from tphyolo.data.files.paths import NO_SUCH_FILE, regular_file_problem
from tphyolo.errors import InputError


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
            raise InputError(f"{len(self.classes)} classes for {len(self.boxes)} boxes")


# The most objects (and, apart, ignore regions) one image keeps: far above the densest drone images (VisDrone-DET
# images hold hundreds), and what bounds the loss's targets (batch x MAX_OBJECTS_PER_IMAGE). The scan keeps
# the first ones of a label file above it and names the file with the count dropped.
MAX_OBJECTS_PER_IMAGE = 4096


# The largest number (in size) a label line may hold: far above any class id, pixel coordinate, track id or frame
# number, and small enough that a class id fits int64 and a coordinate times an image side stays finite in float32.
MAX_LABEL_NUMBER = 1e12


class LabelError(InputError):
    """A label file that cannot be used; the message names the file, the line and the problem."""


def read_label_text(path: Path) -> str:
    """The text of label file `path`: UTF-8, a leading byte-order mark (as some editors write) dropped; the one
    reader of every label format, for every command (scan, eval, convert).

    Raises LabelError naming the file when it is there but not a regular file (a folder, a FIFO, a device, a
    dangling link or a link loop; never opened), and naming the file and line when it is not UTF-8 text
    (UTF-16, Latin-1, binary data: a byte that is not UTF-8, or a NUL byte). FileNotFoundError passes through.
    """
    problem = regular_file_problem(path)
    if problem not in (None, NO_SUCH_FILE):
        raise LabelError(f"{path}: not a regular file ({problem})")
    data = Path(path).read_bytes()
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise LabelError(f"{path}: UTF-16 text (byte-order mark {data[:2].hex(' ')}); label files are UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise LabelError(
            f"{path}:{line}: not UTF-8 text (byte {error.start} is 0x{data[error.start]:02x}); label files are UTF-8"
        ) from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise LabelError(f"{path}:{line}: a NUL byte: binary data, not label text")
    return text


def finite_numbers(fields: list[str], where: str, line: str) -> list[float]:
    """`fields` as floats; raises LabelError prefixed by `where` (file:line) for a non-number, NaN/inf, or a
    number larger in size than `MAX_LABEL_NUMBER` (which would overflow a class id or a scaled coordinate)."""
    try:
        values = [float(f) for f in fields]
    except ValueError:
        raise LabelError(f"{where}: not a number in {line.strip()!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise LabelError(f"{where}: non-finite value in {line.strip()!r}")
    huge = next((v for v in values if abs(v) > MAX_LABEL_NUMBER), None)
    if huge is not None:
        raise LabelError(
            f"{where}: {huge:g} is out of range (at most {MAX_LABEL_NUMBER:g} in size) in {line.strip()!r}"
        )
    return values


def limit_objects(labels: ImageLabels, *, limit: int = MAX_OBJECTS_PER_IMAGE) -> tuple[ImageLabels, list[str]]:
    """`labels` with at most `limit` objects and `limit` ignore regions (the first ones, in file order), and a
    note for each kind cut, with the count dropped."""
    notes = []
    if len(labels.classes) > limit:
        notes.append(f"{len(labels.classes):,} objects, above the limit of {limit:,} per image; the last "
                     f"{len(labels.classes) - limit:,} dropped")  # fmt: skip
    if len(labels.ignore) > limit:
        notes.append(f"{len(labels.ignore):,} ignore regions, above the limit of {limit:,} per image; the last "
                     f"{len(labels.ignore) - limit:,} dropped")  # fmt: skip
    if not notes:
        return labels, notes
    return ImageLabels(labels.classes[:limit], labels.boxes[:limit], labels.ignore[:limit]), notes


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

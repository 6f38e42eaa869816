"""What the exports of labelling tools (CVAT, Label Studio) share: one file for a split whose labels are names.

Such a file is a split source given as it is (`train: export.xml`; its images under the file's `images/` folder,
else beside it), or the file the format keeps beside an `images/` folder (`annotations.xml`, `tasks.json`).
Its boxes carry label names, mapped to class ids through the data set's `names` (without them, the labels in
the order the file first names them). A label named as VisDrone's ignored regions (`IGNORE_LABELS`, any case)
marks an ignore region; one the names lack is an error naming the file, the image and the label.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar

import numpy as np

from tphyolo.data.files.image_io import is_image_name
from tphyolo.data.formats.base import LabeledImage, LabelEntry, LabelFormat, images_folder, one_images_folder
from tphyolo.data.labels import ImageLabels, LabelError
from tphyolo.errors import InputError

IGNORE_LABELS = ("ignored regions", "ignored region", "ignore", "ignored")  # read as ignore regions, any case
IGNORE_LABEL = IGNORE_LABELS[0]  # what ignore regions are written as (VisDrone's name for them)
MAX_EXPORT_BYTES = 512 * 1024**2  # a larger export is refused before it is parsed
UPLOAD_PREFIX = re.compile(r"^[0-9a-f]{8}-")  # Label Studio names an uploaded file `<8 hex digits>-<name>`


def is_ignore(label: str) -> bool:
    return label.strip().lower() in IGNORE_LABELS


@dataclass(frozen=True)
class NamedBoxes:
    """One image of an export: its reference in the file, the size the file declares (None: not given), and
    its boxes (n, 4) pixel xyxy (`scaled`: fractions of the image's sides instead) with their label names."""

    ref: str
    size: tuple[int, int] | None  # (width, height)
    labels: tuple[str, ...]
    boxes: np.ndarray
    scaled: bool = False

    def read(self, path: Path, *, width: int, height: int, names: Sequence[str]) -> tuple[ImageLabels, list[str]]:
        """The labels in the pixels of the width x height image, class ids by `names`; a note when the file
        declares another size. Raises LabelError naming `path`, the image and a label `names` lacks."""
        class_of = {name: i for i, name in enumerate(names)}
        boxes = self.boxes * np.array([width, height, width, height]) if self.scaled else self.boxes
        ignore = np.array([is_ignore(label) for label in self.labels], dtype=bool)
        unknown = sorted({label for label, ign in zip(self.labels, ignore, strict=True) if not ign} - set(class_of))
        if unknown:
            raise LabelError(f"{path}: image {self.ref!r}: label {unknown[0]!r} is not a class of the data set "
                             f"({', '.join(names) or 'no names'}); name it in the data yaml's names")  # fmt: skip
        classes = [class_of[label] for label, ign in zip(self.labels, ignore, strict=True) if not ign]
        notes = []
        if self.size is not None and not self.scaled and self.size != (width, height):
            notes.append(f"{path}: image {self.ref!r}: the file says {self.size[0]}x{self.size[1]}, the image is "
                         f"{width}x{height}")  # fmt: skip
        return ImageLabels(classes, boxes[~ignore], boxes[ignore]), notes


def file_names(entries: Sequence[LabelEntry]) -> tuple[str, ...]:
    """The class names the exports of `entries` define: their labels in the order first named, less ignore
    labels (`entry.data` is (NamedBoxes, the file's own label list))."""
    found: dict[str, None] = {}
    for entry in entries:
        _, listed = entry.data
        for label in (*listed, *entry.data[0].labels):
            if not is_ignore(label):
                found.setdefault(label, None)
    return tuple(found)


def export_source(source: Path, *, suffix: str, beside: str) -> tuple[Path, Path] | None:
    """(export file, folder its image references are relative to) of a split source: a `suffix` file (its
    `images/` folder when there is one, else its folder), or an `images/` folder with `../beside`; else None."""
    if source.suffix.lower() == suffix and source.is_file():
        images = source.parent / "images"
        return source, images if images.is_dir() else source.parent
    if source.is_dir() and source.name == "images" and (source.parent / beside).is_file():
        return source.parent / beside, source
    return None


def read_export(path: Path, what: str) -> bytes:
    """The bytes of export `path`; LabelError naming it above MAX_EXPORT_BYTES (never read whole)."""
    size = os.stat(path).st_size
    if size > MAX_EXPORT_BYTES:
        raise LabelError(f"{path}: {size:,} bytes, above the limit of {MAX_EXPORT_BYTES:,} for a {what}")
    return path.read_bytes()


class ImageFinder:
    """Finds the image file an export names under `base`: the path as given, else the one image of that file
    name below `base` (a tool may keep only the name, or prefix an uploaded one: `1a2b3c4d-x.jpg`)."""

    def __init__(self, base: Path) -> None:
        self.base, self._by_name = base, None

    def __call__(self, ref: str) -> Path:
        relative = PurePosixPath(ref.replace("\\", "/"))
        parts = [p for p in relative.parts if p not in ("/", "..", ".")]
        exact = self.base.joinpath(*parts) if parts else self.base
        if exact.is_file() or not parts:
            return exact
        if self._by_name is None:
            self._by_name = {}
            for root, _, files in os.walk(self.base, followlinks=True):
                for name in files:
                    if is_image_name(Path(name)):
                        self._by_name.setdefault(name, []).append(Path(root) / name)
        name = parts[-1]
        for candidate in (name, UPLOAD_PREFIX.sub("", name)):
            if len(found := self._by_name.get(candidate, [])) == 1:
                return found[0]
        return exact  # not there: the scan names it


def tool_rows(image: LabeledImage, names: Sequence[str]) -> Iterator[tuple[str, tuple[float, ...], float | None]]:
    """(label name, xyxy, score or None) of each object of `image`, then its ignore regions as IGNORE_LABEL."""
    scores = image.scores if image.scores is not None else [None] * len(image.labels.classes)
    for c, box, score in zip(image.labels.classes.tolist(), image.labels.boxes.tolist(), scores, strict=True):
        yield names[c], tuple(box), None if score is None else float(score)
    for box in image.labels.ignore.tolist():
        yield IGNORE_LABEL, tuple(box), None


def relative_ref(image: LabeledImage, base: Path | None) -> str:
    """`image`'s name in an export: its path relative to `base` (default: its `images/` folder), posix-style."""
    base = base if base is not None else images_folder(image.image)
    if base is None:
        raise InputError(f"{image.image}: not under an images/ folder, so an export cannot name it")
    return image.image.relative_to(base).as_posix()


class ExportFormat(LabelFormat):
    """A labelling tool's export as a label format: one file per split (`export_source`) whose entries carry
    (NamedBoxes, the labels the file lists). A subclass says which files are its own (`suffix`, `claims`), the
    one kept beside `images/` (`beside`, `what`), how to read one (`load`) and how to write it (`serialize`)."""

    by_name = True
    suffix: ClassVar[str]
    beside: ClassVar[str]
    what: ClassVar[str]

    def claims(self, path: Path) -> bool:
        """Whether the file `path` (of this format's suffix) is this format's, not another's."""
        return True

    def load(self, path: Path) -> tuple[tuple[str, ...], list[NamedBoxes]]:
        """The labels the file `path` lists and its images; LabelError naming it for a bad one."""
        raise NotImplementedError

    def split_entries(self, source: Path) -> list[LabelEntry] | None:
        found = export_source(source, suffix=self.suffix, beside=self.beside)
        if found is None or not self.claims(found[0]):
            return None
        path, base = found
        listed, images = self.load(path)
        find = ImageFinder(base)
        return [LabelEntry(find(im.ref), self.name, path, data=(im, listed)) for im in images]

    def own_names(self, entries: Sequence[LabelEntry]) -> tuple[str, ...]:
        return file_names(entries)

    def read(self, entry: LabelEntry, *, width: int, height: int, num_classes: int,
             categories: tuple[int, ...] = (),
             names: tuple[str, ...] = ()) -> tuple[ImageLabels, list[str]]:  # fmt: skip
        return entry.data[0].read(entry.label, width=width, height=height, names=names)

    def cache_file(self, entry: LabelEntry) -> Path:
        return entry.label.with_name(f"{entry.label.stem}.cache.json")

    def serialize(self, images: Sequence[LabeledImage], names: Sequence[str]) -> str:
        """The file's text for `images`, named relative to their `images/` folder."""
        raise NotImplementedError

    def write(self, images: Sequence[LabeledImage], *, names: Sequence[str]) -> list[Path]:
        """`beside` next to the `images/` folder that holds every image."""
        path = one_images_folder(images, self.what).parent / self.beside
        path.write_text(self.serialize(images, names), encoding="utf-8")
        return [path]

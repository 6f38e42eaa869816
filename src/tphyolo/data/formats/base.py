"""The interface every label format implements, and the records it exchanges with the scan.

A format finds the labels of a split in one of two ways: one label file per image, beside the image folder
(`images/a/b.jpg` -> `<folder>/a/b.txt`; VisDrone, YOLO), or one file that describes the whole split (COCO).
It then reads one image's labels into pixel xyxy `ImageLabels`, and writes labels in its own layout.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tphyolo.data.labels import ImageLabels
from tphyolo.errors import InputError


@dataclass(frozen=True)
class LabelEntry:
    """Where one image's labels are.

    `fmt` is the format's registry name, None when no label folder of any format exists (the image is
    background). `label` is the label file (a whole-split format: its file; None when the image is not under
    an `images/` folder), `ignore` an optional side file of ignore regions, `data` what a whole-split format
    already read for this image. `label` and `ignore` are the files the scan cache is keyed on.
    """

    image: Path
    fmt: str | None
    label: Path | None = None
    ignore: Path | None = None
    data: Any = None


@dataclass(frozen=True)
class LabeledImage:
    """One image to write labels for: its file (under an `images/` folder), displayed size and labels; `scores`
    (one per object) when the labels are a model's predictions, written by the formats that keep them."""

    image: Path
    height: int
    width: int
    labels: ImageLabels
    scores: np.ndarray | None = None


def images_folder(image: Path) -> Path | None:
    """The last `images` folder above `image` (the root of a split's images), None when there is none."""
    parts = image.parts
    if "images" not in parts[:-1]:
        return None
    i = len(parts) - 2 - parts[-2::-1].index("images")
    return Path(*parts[: i + 1])


def one_images_folder(images: Sequence[LabeledImage], what: str) -> Path:
    """The one `images/` folder that holds every one of `images`; InputError saying that `what` (a format's
    labels) needs one when they are under several or none."""
    folders = {images_folder(im.image) for im in images}
    if len(folders) != 1 or None in folders:
        raise InputError(f"{what} need every image under one images/ folder, got {sorted(map(str, folders))}")
    return next(iter(folders))


def sibling_file(image: Path, folder: str, suffix: str = ".txt") -> Path | None:
    """`.../<folder>/a/b<suffix>` for the image `.../images/a/b.jpg`; None when it is not under `images/`."""
    images = images_folder(image)
    if images is None:
        return None
    return images.parent / folder / image.relative_to(images).parent / (image.stem + suffix)


def label_folder_cache(label: Path) -> Path:
    """The scan cache of a per-image label folder: `<folder>.cache.json` beside the label folder."""
    folder = label.parent
    return folder.parent / f"{folder.name}.cache.json"


class LabelFormat(ABC):
    """One on-disk label format; the registry (`tphyolo.data.formats.FORMATS`) maps `name` to an instance.

    A per-image format implements `label_file` (and `ignore_file` when it has side files); a whole-split format
    implements `split_entries`. Both implement `read` and `write`.
    """

    name: ClassVar[str]
    names: ClassVar[tuple[str, ...]] = ()  # the format's own class names; () = numbered from the labels
    by_name: ClassVar[bool] = False  # whether its files name their labels (the scan passes `names` to `read`)

    def split_entries(self, source: Path) -> list[LabelEntry] | None:
        """The images of a split source this format describes as a whole, or None when `source` is not one."""
        return None

    def own_names(self, entries: Sequence[LabelEntry]) -> tuple[str, ...]:
        """The class names the files of `entries` (all of this format) define: `names` unless the files list
        their own (the labels of a labelling tool's export)."""
        return self.names

    def label_file(self, image: Path) -> Path | None:
        """Where this format keeps `image`'s labels, whether or not the file exists (None: not per-image)."""
        return None

    def ignore_file(self, image: Path) -> Path | None:
        """Where this format keeps `image`'s ignore regions apart from its labels (None: nowhere)."""
        return None

    def image_entry(self, image: Path) -> LabelEntry | None:
        """`image`'s entry when this format's label folder for it exists, else None."""
        label = self.label_file(image)
        if label is None or not label.parent.is_dir():
            return None
        return LabelEntry(image, self.name, label, self.ignore_file(image))

    @abstractmethod
    def read(self, entry: LabelEntry, *, width: int, height: int, num_classes: int,
             categories: tuple[int, ...] = (),
             names: tuple[str, ...] = ()) -> tuple[ImageLabels, list[str]]:  # fmt: skip
        """The labels of one image (width x height as displayed) in pixel xyxy, and notes naming the file.

        `num_classes` is the dataset's class count (0 = unknown); `categories` the category number of each class
        for formats whose files number categories (VisDrone), () for class index + 1
        (`tphyolo.data.categories`): the scan passes it only when a data set maps its categories, so a format
        whose labels are class ids need not take it. `names`: the class names, for formats whose files name
        their labels (CVAT, Label Studio); the scan passes them only to those (`by_name`). Raises LabelError
        naming the file and the problem; OSError and UnicodeDecodeError pass through."""

    def cache_file(self, entry: LabelEntry) -> Path:
        """Where the scan cache of a split whose first labelled image is `entry` is kept."""
        return label_folder_cache(entry.label)

    @abstractmethod
    def write(self, images: Sequence[LabeledImage], *, names: Sequence[str]) -> list[Path]:
        """Write the labels of `images` (files under an `images/` folder) where this format reads them,
        overwriting their label files; an image without objects gets an empty one. Returns the files written."""

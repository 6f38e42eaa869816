"""A sliced copy of a dataset, for training on tiles of large images (`tphyolo data slice`).

    summary = slice_dataset(load_data_config("data.yaml"), "sliced/", DatasetSlicing(size=640, overlap=0.2))
    tphyolo.train(..., data=summary.yaml)

Each image of the chosen splits is cut into the tiles of `tphyolo.ops.tiling` (the windows sliced inference
runs) and each tile is written as an image of its own, named `STEM_X_Y` after its top-left corner, with its
labels in the dataset's own format (VisDrone annotations, YOLO labels, COCO json; YOLO when the split mixes
formats or has none). The rules for a box that a tile edge cuts:

- the box is clipped to the tile; it stays an object when at least `min_visible` of its area is inside;
- a smaller visible part becomes an ignore region (neither object nor background: the model is not taught
  that a third of a car is no car), as do the clipped parts of the image's own ignore regions (VisDrone's
  category 0, YOLO `ignore/` files, COCO crowd boxes).

Tiles without objects (negatives) are kept at `empty_ratio` per tile with objects, drawn at random with `seed`.
The yaml written (`OUT/data.yaml`) names the sliced splits and the classes, ready for `tphyolo train`.

`TileWindows` draws such tiles while training instead (`tphyolo train --tile`): windows at the images' own
resolution, cut by the same rule (`tile_labels`), new ones every epoch, with no copy of the data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import yaml

from tphyolo.data.dataset_config import SPLITS, DataConfig
from tphyolo.data.files.image_io import read_image
from tphyolo.data.formats import get_format
from tphyolo.data.formats.base import LabeledImage
from tphyolo.data.labels import ImageLabels
from tphyolo.data.scan import scan_split
from tphyolo.data.tile_settings import DEFAULT_EMPTY_RATIO, DEFAULT_MIN_VISIBLE, DatasetSlicing, tile_labels
from tphyolo.errors import InputError
from tphyolo.ops.tiling import tile_grid

JPEG_QUALITY = 95
OBJECT_SHARE = 0.5  # windows drawn around a randomly chosen object (the rest anywhere in the image)

@dataclass(frozen=True)
class SlicedSplit:
    """What slicing one split wrote: images read, tiles with objects, negative tiles kept of those found, the
    label format written, files the scan skipped as unusable, and the class names."""

    split: str
    images: int
    positive: int
    negative_kept: int
    negative_found: int
    label_format: str
    skipped: int
    names: tuple[str, ...]


@dataclass(frozen=True)
class SlicedDataset:
    """The data yaml written and what each sliced split holds."""

    yaml: Path
    splits: tuple[SlicedSplit, ...]


@dataclass(frozen=True)
class Window:
    """One training window: the record `image` it is cut from, `tile` (x1, y1, x2, y2) in that image's pixels,
    and the image's labels as seen in it (`tile_labels`: in the window's pixels, cut objects as ignore regions)."""

    image: int
    tile: tuple[int, int, int, int]
    labels: ImageLabels


class TileWindows:
    """The windows of `size` px that training on tiles draws, epoch by epoch, from images of `sizes` (h, w)
    with `labels` (`ImageLabels` in their own pixels).

    An epoch holds as many windows as the images have tiles of `size` side by side (`tile_grid` without
    overlap), image i owning that many of its own; window k of an epoch is a function of (seed, epoch, k) alone,
    as the samples of `DetectionDataset` are, so a resumed run draws the windows the uninterrupted one drew.
    A window of an image with objects lies around one of them, chosen at random, with probability
    `object_share`; else anywhere in the image, kept when empty with probability `empty_ratio` (else drawn around
    an object instead), which bounds the share of empty windows. An image no larger than `size` is one window,
    the whole image. Objects less than `min_visible` inside become ignore regions (`tile_labels`)."""

    def __init__(
        self, sizes: list[tuple[int, int]], labels: list[ImageLabels], *, size: int, seed: int = 0,
        object_share: float = OBJECT_SHARE, empty_ratio: float = DEFAULT_EMPTY_RATIO,
        min_visible: float = DEFAULT_MIN_VISIBLE,
    ) -> None:  # fmt: skip
        self.sizes, self.labels, self.size, self.seed = list(sizes), list(labels), size, seed
        self.object_share, self.empty_ratio, self.min_visible = object_share, empty_ratio, min_visible
        counts = [len(tile_grid(h, w, size=size, overlap=0.0)) for h, w in self.sizes]
        self.owner = np.repeat(np.arange(len(counts)), counts)

    def __len__(self) -> int:
        return len(self.owner)

    def describe(self) -> str:
        """One line: how many windows an epoch holds and how they are drawn."""
        return (f"training on tiles: {len(self)} windows of {self.size} px per epoch from {len(self.sizes)} images "
                f"at their own resolution (as many as their tiles side by side), {self.object_share:.0%} around a "
                f"random object, the rest anywhere, empty ones kept at {self.empty_ratio:.0%}; objects less than "
                f"{self.min_visible:.0%} inside a window become ignore regions")  # fmt: skip

    def window(self, k: int, epoch: int) -> Window:
        """Window `k` of `epoch` (class docstring)."""
        image = int(self.owner[k])
        rng = np.random.default_rng([self.seed % 2**64, epoch, k, 1])  # apart from the sample's own draws
        boxes = self.labels[image].boxes
        if len(boxes) and rng.random() >= self.object_share:
            tile = self._anywhere(image, rng)
            labels = self._cut(image, tile)
            if len(labels.classes) or rng.random() < self.empty_ratio:
                return Window(image, tile, labels)
        if len(boxes):
            tile = self._around(image, boxes[int(rng.integers(len(boxes)))], rng)
        else:
            tile = self._anywhere(image, rng)
        return Window(image, tile, self._cut(image, tile))

    def _cut(self, image: int, tile: tuple[int, int, int, int]) -> ImageLabels:
        return tile_labels(self.labels[image], tile, min_visible=self.min_visible)

    def _extent(self, image: int) -> tuple[int, int, int, int]:
        h, w = self.sizes[image]
        return h, w, min(self.size, h), min(self.size, w)

    def _anywhere(self, image: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
        h, w, th, tw = self._extent(image)
        x, y = int(rng.integers(0, w - tw + 1)), int(rng.integers(0, h - th + 1))
        return x, y, x + tw, y + th

    def _around(self, image: int, box: np.ndarray, rng: np.random.Generator) -> tuple[int, int, int, int]:
        """A window holding `box` at a random place (its centre, when the box is larger than the window)."""
        h, w, th, tw = self._extent(image)
        starts = []
        for lo, hi, side, length in ((box[0], box[2], tw, w), (box[1], box[3], th, h)):
            first, last = (hi - side, lo) if hi - lo <= side else ((lo + hi - side) / 2,) * 2
            start = rng.uniform(max(first, 0), max(min(last, length - side), max(first, 0)))
            starts.append(int(np.clip(round(start), 0, length - side)))
        x, y = starts
        return x, y, x + tw, y + th


def _write_tile(image: np.ndarray, path: Path) -> None:
    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY] if path.suffix.lower() in (".jpg", ".jpeg") else []
    if not cv2.imwrite(str(path), image, params):
        raise OSError(f"{path}: could not be written")


def _slice_split(sources, out: Path, cfg: DatasetSlicing, *, split: str, names: Sequence[str], rng) -> SlicedSplit:
    """Slice one split into `out/split/images` (+ its labels); the negatives kept are drawn with `rng`."""
    scan = scan_split(sources, names=tuple(names), cache=False)
    label_format = scan.report.formats[0] if len(scan.report.formats) == 1 else "yolo"
    positive, negative = [], []  # (record index, tile, labels in the tile)
    for i, record in enumerate(scan.records):
        for tile in tile_grid(record.height, record.width, size=cfg.size, overlap=cfg.overlap):
            labels = tile_labels(record.labels, tile, min_visible=cfg.min_visible)
            (positive if len(labels.classes) else negative).append((i, tile, labels))
    n_negative = min(len(negative), round(cfg.empty_ratio * len(positive)))
    drawn = sorted(rng.choice(len(negative), size=n_negative, replace=False).tolist()) if n_negative else []
    chosen = sorted(positive + [negative[k] for k in drawn], key=lambda entry: entry[0])  # image by image
    folder = out / split / "images"
    folder.mkdir(parents=True, exist_ok=True)
    written, image, image_index = [], None, -1
    for i, (x1, y1, x2, y2), labels in chosen:
        record = scan.records[i]
        if i != image_index:
            image, image_index = read_image(record.im_file), i
        source = Path(record.im_file)
        path = folder / f"{source.stem}_{x1}_{y1}{source.suffix}"
        _write_tile(image[y1:y2, x1:x2], path)
        written.append(LabeledImage(path, y2 - y1, x2 - x1, labels))
    if written:
        get_format(label_format).write(written, names=list(names or scan.names))
    return SlicedSplit(split, len(scan.records), len(positive), n_negative, len(negative), label_format,
                       len(scan.report.problems), tuple(scan.names))  # fmt: skip


def slice_dataset(
    data: DataConfig,
    out: str | Path,
    cfg: DatasetSlicing | None = None,
    *,
    splits: Sequence[str] = SPLITS,
    log: Callable[[str], None] | None = None,
) -> SlicedDataset:
    """Write the sliced copy of `data`'s `splits` (those it has) under `out` (module docstring) and
    `out/data.yaml`, in which a split not sliced is the original one. `log` gets one line per split. Raises
    ValueError for an unknown split name or when none of `splits` has images, FileExistsError when `out` holds
    files already."""
    unknown = sorted(set(splits) - set(SPLITS))
    if unknown:
        raise InputError(f"unknown split(s) {unknown}; known: {list(SPLITS)}")
    cfg = cfg or DatasetSlicing()
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out}: not empty; slice into a new folder")
    rng = np.random.default_rng(cfg.seed)
    names = data.names
    if not any(data.split(split) for split in splits):
        raise InputError(f"{data.source or data.root}: no images in split(s) {', '.join(splits)} to slice")
    done, written = [], {}
    for split in SPLITS:
        sources = data.split(split)
        if not sources:
            continue
        if split not in splits:
            written[split] = [str(s) for s in sources]
            continue
        sliced = _slice_split(sources, out, cfg, split=split, names=names, rng=rng)
        done.append(sliced)
        names = names or sliced.names
        written[split] = f"{split}/images"
        if log is not None:
            log(f"{split}: {sliced.images} images -> {sliced.positive} tiles with objects + {sliced.negative_kept} "
                f"of {sliced.negative_found} without ({sliced.label_format} labels, {sliced.skipped} files skipped)")
    config = {"path": str(out.resolve()), **written, "nc": len(names), "names": dict(enumerate(names))}
    path = out / "data.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return SlicedDataset(path, tuple(done))

"""Calibration images of an INT8 export: images of a dataset split, letterboxed as inference letterboxes them.

The split is scanned by the data code that training uses (`tphyolo.data.scan.scan_split`: every label format,
unusable files skipped and reported), images are decoded by `read_image` and letterboxed by `letterbox` with
the settings of prediction: long side `imgsz`, scaled up or down, grey padding; a `dynamic` export is given the
smallest stride multiple that holds the image (prediction's `auto` padding), a fixed-size one its export size.

Which images: `count` of them (all when the split holds fewer), spread evenly over the split in the scan's
order, so that a split sorted by scene or sequence is sampled across its whole length. Each batch is
uint8 RGB (B, 3, H, W), what `ExportedBackend.prepare` takes; a fixed-size export's batches hold its export
batch, a dynamic export's one image each (shapes differ).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tphyolo.data.dataset_config import DataConfig
from tphyolo.data.files.image_io import read_image
from tphyolo.data.letterbox import letterbox
from tphyolo.data.scan import scan_split
from tphyolo.errors import InputError


@dataclass(frozen=True)
class Calibration:
    """The batches a quantizer calibrates on, and what they are, in words (for the file's metadata)."""

    batches: list[np.ndarray]
    description: str

    @property
    def images(self) -> int:
        return sum(len(batch) for batch in self.batches)


def data_name(data: DataConfig) -> str:
    """How metadata names a dataset: its yaml's stem, or its folder's name when the stem says nothing."""
    if data.source is not None and data.source.stem not in ("data", "dataset"):
        return data.source.stem
    return data.root.name


def spread_indices(total: int, count: int) -> list[int]:
    """`min(count, total)` indices of 0..total-1, evenly spread, first and last included, in order."""
    if count >= total:
        return list(range(total))
    if count == 1:
        return [0]
    return [round(i * (total - 1) / (count - 1)) for i in range(count)]


def calibration_batches(
    data: DataConfig,
    *,
    split: str = "train",
    count: int,
    imgsz: int,
    stride: int,
    dynamic: bool,
    batch: int = 1,
    progress: Callable | None = None,
) -> Calibration:
    """The calibration batches of `data`'s `split` (see the module docstring): uint8 RGB (B, 3, H, W).
    `progress` wraps the iteration over the chosen images (e.g. `tqdm` with a description), None for none.
    ValueError naming the data when the split has no usable image."""
    if count < 1:
        raise InputError(f"--calib-images must be at least 1, got {count}")
    sources = data.split(split)
    where = data.source or data.root
    if not sources:
        raise InputError(f"data {where}: no '{split}' split to calibrate on")
    records = scan_split(sources, names=data.names).records
    if not records:
        raise InputError(f"data {where}: no usable image in the '{split}' split to calibrate on")
    chosen = [records[i] for i in spread_indices(len(records), count)]
    images = []
    for record in progress(chosen) if progress is not None else chosen:
        boxed, _ = letterbox(read_image(record.im_file), imgsz, stride=stride, auto=dynamic)
        images.append(np.ascontiguousarray(boxed[:, :, ::-1].transpose(2, 0, 1)))  # BGR -> RGB, (3, H, W)
    described = f"{data_name(data)} {split}: {len(chosen)} of {len(records)} images, letterboxed to {imgsz} px"
    if dynamic:
        return Calibration([image[None] for image in images], described)
    whole = len(images) // batch * batch  # whole batches only; fewer images than one batch are repeated
    images = images[:whole] if whole else (images * batch)[:batch]
    return Calibration([np.stack(images[i : i + batch]) for i in range(0, len(images), batch)], described)

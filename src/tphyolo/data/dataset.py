"""`DetectionDataset`: scanned records -> augmented, letterboxed samples.

A sample's image is uint8 RGB (3, H, W); labels are (n, 5) `class, cx, cy, w, h` normalised by (W, H);
ignore regions are (k, 4) xyxy pixels of the returned image. `ratio`, `pad` map a non-augmented sample
back to the original image (x0 = (x - pad_x) / ratio_x). Augmented samples are warped afterwards, so there
they describe the letterbox step only; for mosaic samples (built from 4 images) they are (1, 1), (0, 0).

An augmented sample is a function of (seed, epoch, index) alone: its random draws (mosaic partners and centre,
warp, flips, mixup, HSV) come from a generator seeded with those three, never from a process-wide one, so it
does not matter which loader worker draws it, nor how many epochs that worker drew before (a resumed run draws
what the uninterrupted one drew). The epoch comes with the key (`SampleKey`, from `EpochSampler`) or, for a
plain index, from `set_epoch`.

Training on tiles (`tile`): an index is a window of the epoch (`tphyolo.data.tiles.TileWindows`), cut from its
image at the image's own resolution, never resized; its labels follow the shared cut rule (`tile_labels`). The
window then goes through the augmentation a whole image goes through (mosaic of four windows, warp, HSV, flips).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from tphyolo.data.augment import (
    Hyp,
    apply_warp,
    augment_hsv,
    draw_warp,
    fill_regions,
    mixup_images,
    mixup_weight,
    random_perspective,
    source_window,
)
from tphyolo.data.files.image_cache import ImageCache, load_resized
from tphyolo.data.letterbox import letterbox, map_boxes
from tphyolo.data.mosaic import mosaic4
from tphyolo.data.sampler import SampleKey
from tphyolo.data.scan import Record
from tphyolo.data.tiles import TileWindows
from tphyolo.errors import InputError
from tphyolo.ops.boxes import xyxy_to_cxcywh

IGNORE_MODES = ("fill", "keep")


@dataclass
class Sample:
    """One dataset item (see module docstring for coordinate conventions)."""

    image: torch.Tensor  # (3, H, W) uint8 RGB
    labels: torch.Tensor  # (n, 5) float32 class, cx, cy, w, h normalised
    ignore: torch.Tensor  # (k, 4) float32 xyxy pixels of `image`
    path: str
    shape0: tuple[int, int]  # (h0, w0) original image size
    ratio: tuple[float, float]  # (rx, ry) letterboxed / original
    pad: tuple[int, int]  # (left, top) pixels


def rect_batch_shapes(shapes: np.ndarray, *, batch_size: int, imgsz: int, stride: int, pad: float) -> np.ndarray:
    """(nb, 2) (h, w) per batch for `shapes` (N, 2) (h0, w0) already sorted by aspect ratio h / w: the smallest
    stride multiple holding every image of the batch at long side imgsz (plus `pad` strides)."""
    aspect = shapes[:, 0] / shapes[:, 1]
    nb = math.ceil(len(shapes) / batch_size)
    out = np.ones((nb, 2))
    for b in range(nb):
        a = aspect[b * batch_size : (b + 1) * batch_size]
        lo, hi = a.min(), a.max()
        if hi < 1:
            out[b] = (hi, 1)
        elif lo > 1:
            out[b] = (1, 1 / lo)
    return (np.ceil(out * imgsz / stride + pad) * stride).astype(int)


@dataclass(frozen=True)
class RectBatches:
    """Rectangular batches: each batch of `batch_size` images (sorted by aspect ratio) letterboxed to its own
    minimal stride-multiple shape, `pad` strides added (`rect_batch_shapes`)."""

    batch_size: int = 16
    pad: float = 0.0


class DetectionDataset(Dataset):
    """Samples of a scanned split.

    imgsz: training size (long side); augment: mosaic/affine/mixup/HSV/flips per `hyp`; rect: the rectangular
    batches (`RectBatches`, no mosaic) or None for square `imgsz` samples; stride: what letterboxed sides are
    multiples of;
    ignore_mode: "fill" paints ignore regions grey 114 (neither positive nor negative), "keep" leaves them;
    cache: None, "ram" or "disk" (see `ImageCache`; with `tile`, the full images); seed: with the epoch and the
    index, what an augmented sample's random draws are seeded with (see the module docstring); tile: train on
    windows of this many pixels (`TileWindows`; not with `rect`).
    """

    def __init__(
        self,
        records: list[Record],
        *,
        imgsz: int = 640,
        augment: bool = False,
        hyp: Hyp | None = None,
        rect: RectBatches | None = None,
        stride: int = 32,
        ignore_mode: str = "fill",
        cache: str | None = None,
        seed: int = 0,
        tile: int | None = None,
    ) -> None:
        if ignore_mode not in IGNORE_MODES:
            raise InputError(f"ignore_mode {ignore_mode!r}: expected one of {IGNORE_MODES}")
        if not records:
            raise InputError("no usable images in this split (see the scan report)")
        if tile is not None and rect is not None:
            raise InputError("training on tiles draws its windows at random: not with rect batches")
        self.imgsz, self.augment, self.hyp = imgsz, augment, hyp or Hyp()
        self.rect, self.stride, self.ignore_mode = rect is not None, stride, ignore_mode
        self.records = list(records)
        self.batch_shapes = None
        if rect is not None:
            shapes = np.array([(r.height, r.width) for r in self.records], dtype=np.float64)
            order = np.argsort(shapes[:, 0] / shapes[:, 1], kind="stable")
            self.records = [self.records[i] for i in order]
            self.batch_shapes = rect_batch_shapes(
                shapes[order], batch_size=rect.batch_size, imgsz=imgsz, stride=stride, pad=rect.pad
            )
            self.batch_size = rect.batch_size
        self.image_cache = None
        if cache:
            files = [r.im_file for r in self.records]
            shapes_list = [(r.height, r.width) for r in self.records]
            self.image_cache = ImageCache(files, shapes_list, imgsz=None if tile else imgsz, mode=cache,
                                          augment=augment)  # fmt: skip
        self.seed, self.epoch = seed, 0
        self.tiles = None
        if tile is not None:
            self.tiles = TileWindows([(r.height, r.width) for r in self.records], [r.labels for r in self.records],
                                     size=tile, seed=seed)  # fmt: skip

    def set_epoch(self, epoch: int) -> None:
        """The epoch a plain index draws for (a `SampleKey` names its own)."""
        self.epoch = epoch

    def sample_rng(self, index: int, epoch: int) -> np.random.Generator:
        """The generator of every random draw of sample `index` in `epoch`."""
        return np.random.default_rng([self.seed % 2**64, epoch, index])  # negative seeds too

    def __len__(self) -> int:
        return len(self.tiles) if self.tiles is not None else len(self.records)

    def load_image(self, i: int) -> np.ndarray:
        """Image i as uint8 BGR, resized to long side imgsz, or at its own size with `tile` (from the image cache
        when there is one)."""
        if self.image_cache is not None:
            return self.image_cache.get(i)
        return load_resized(self.records[i].im_file, None if self.tiles else self.imgsz, augment=self.augment)

    def record(self, index: int, epoch: int) -> Record:
        """The record sample `index` of `epoch` is drawn from (with `tile`: its window's image)."""
        return self.records[self.tiles.window(index, epoch).image if self.tiles is not None else index]

    def source(self, index: int, epoch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Sample `index`'s pixels before augmentation and their labels: (image (H, W, 3) uint8 BGR, classes (n,),
        boxes (n, 4), ignore regions (k, 4) xyxy pixels of the image): the image resized to long side imgsz, or
        with `tile` the window of `epoch`, its pixels as they are in the full image."""
        if self.tiles is None:
            image = self.load_image(index)
            return image, *self._resized_labels(index, image)
        window = self.tiles.window(index, epoch)
        x1, y1, x2, y2 = window.tile
        image = self.load_image(window.image)[y1:y2, x1:x2]
        labels = window.labels
        return image, labels.classes, labels.boxes.astype(np.float32), labels.ignore.astype(np.float32)

    def _resized_labels(self, i: int, image: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = self.records[i]
        h, w = image.shape[:2]
        scale = np.array([w / r.width, h / r.height] * 2, dtype=np.float32)
        return r.labels.classes, r.labels.boxes * scale, r.labels.ignore * scale

    def _mosaic(
        self, index: int, epoch: int, flips: tuple[bool, bool], rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A 4-image mosaic on a (2s, 2s) canvas, warped to (s, s). Only the canvas part the warp reads is built."""
        s = self.imgsz
        indices = [index, *rng.integers(0, len(self), 3).tolist()]
        center = (int(rng.uniform(s / 2, 3 * s / 2)), int(rng.uniform(s / 2, 3 * s / 2)))
        images, classes, boxes, ignore = [], [], [], []
        for i in indices:
            image, c, b, g = self.source(i, epoch)
            images.append(image)
            classes.append(c)
            boxes.append(b)
            ignore.append(g)
        warp = draw_warp(rng, self.hyp, in_hw=(2 * s, 2 * s), out_hw=(s, s), flip_lr=flips[0], flip_ud=flips[1])
        window = source_window(warp, (2 * s, 2 * s))
        canvas, offsets = mosaic4(images, size=s, center=center, window=window)
        shift = [np.array([dx, dy, dx, dy], dtype=np.float32) for dx, dy in offsets]
        boxes = np.concatenate([b + o for b, o in zip(boxes, shift, strict=True)]).clip(0, 2 * s)
        ignore = np.concatenate([g + o for g, o in zip(ignore, shift, strict=True)]).clip(0, 2 * s)
        classes = np.concatenate(classes)
        canvas, keep, boxes, ignore = apply_warp(canvas, boxes, ignore, warp, origin=window[:2])
        return canvas, classes[keep], boxes, ignore

    def __getitem__(self, key: int | SampleKey) -> Sample:
        index, epoch = key if isinstance(key, SampleKey) else (key, self.epoch)
        r = self.record(index, epoch)
        ratio, pad = (1.0, 1.0), (0, 0)
        flips = (False, False)
        rng = self.sample_rng(index, epoch) if self.augment else None
        if self.augment:  # flips are folded into the geometric warp
            flips = (bool(rng.random() < self.hyp.fliplr), bool(rng.random() < self.hyp.flipud))
        if self.augment and not self.rect and rng.random() < self.hyp.mosaic:
            image, classes, boxes, ignore = self._mosaic(index, epoch, flips, rng)
            if rng.random() < self.hyp.mixup:
                other = int(rng.integers(0, len(self)))
                image2, classes2, boxes2, ignore2 = self._mosaic(other, epoch, (False, False), rng)
                image = mixup_images(image, image2, mixup_weight(rng))
                classes = np.concatenate([classes, classes2])
                boxes = np.concatenate([boxes, boxes2])
                ignore = np.concatenate([ignore, ignore2])
        else:
            loaded, classes, boxes, ignore = self.source(index, epoch)
            shape = tuple(self.batch_shapes[index // self.batch_size]) if self.rect else self.imgsz
            image, info = letterbox(loaded, shape, stride=self.stride, auto=False, scaleup=self.augment)
            boxes, ignore = map_boxes(boxes, info), map_boxes(ignore, info)
            ratio = info.ratio if self.tiles is not None else (loaded.shape[1] * info.ratio[0] / r.width,
                                                               loaded.shape[0] * info.ratio[1] / r.height)
            pad = info.pad
            if self.augment:
                image, keep, boxes, ignore = random_perspective(
                    image, boxes, ignore, rng, self.hyp, flip_lr=flips[0], flip_ud=flips[1]
                )
                classes = classes[keep]
        if self.augment:
            hyp = self.hyp
            image = augment_hsv(image, rng, hgain=hyp.hsv_h, sgain=hyp.hsv_s, vgain=hyp.hsv_v, rgb_out=True)
        else:
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)  # a new array: cached images stay untouched
        if self.ignore_mode == "fill" and len(ignore):
            fill_regions(image, ignore)
        h, w = image.shape[:2]
        labels = np.zeros((len(classes), 5), dtype=np.float32)
        if len(classes):
            labels[:, 0] = classes
            labels[:, 1:] = xyxy_to_cxcywh(boxes) / np.array([w, h, w, h])
        chw = np.ascontiguousarray(image.transpose(2, 0, 1))  # (3, H, W) RGB
        return Sample(
            image=torch.from_numpy(chw),
            labels=torch.from_numpy(labels),
            ignore=torch.from_numpy(np.ascontiguousarray(ignore, dtype=np.float32)),
            path=r.im_file,
            shape0=(r.height, r.width),
            ratio=ratio,
            pad=pad,
        )

"""Torch datasets of object crops: augmented training crops from patches, fixed crops for validation.

Both yield (crop, label): crop (3, size, size) uint8 RGB, label an int index into the classifier's classes.
Training crops jitter the object's box inside its patch (scale and translation), grow it by the context,
clip it to the image border and warp it with the same `cut_crops` as inference; then left-right / up-down
flips and HSV colour jitter. Each sample's randomness depends only on (seed, epoch, index), so it does not
matter which loader worker draws it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from tphyolo.classify.crops import CropSet, ObjectPatch, context_regions, cut_crops
from tphyolo.data.augment import augment_hsv


@dataclass(frozen=True)
class CropAugment:
    """Crop augmentation. fliplr / flipud: flip probabilities; hsv_*: HSV gain ranges; scale: the box size is
    multiplied by U(1 - scale, 1 + scale); translate: its centre moves by U(-translate, translate) of its size."""

    fliplr: float = 0.5
    flipud: float = 0.0
    hsv_h: float = 0.015
    hsv_s: float = 0.4
    hsv_v: float = 0.3
    scale: float = 0.1
    translate: float = 0.1

    def margin(self, context: float) -> float:
        """How far (a fraction of the box size, each side) a jittered context region can reach past the box."""
        return self.translate + (1 + self.scale) * (0.5 + context) - 0.5


def jitter_box(box: np.ndarray, augment: CropAugment, rng: np.random.Generator) -> np.ndarray:
    """(4,) xyxy box -> (4,) float32 box scaled by U(1 - scale, 1 + scale) and moved by U(-translate, translate)
    of its width and height."""
    x1, y1, x2, y2 = (float(v) for v in box)
    w, h = x2 - x1, y2 - y1
    grow = rng.uniform(1 - augment.scale, 1 + augment.scale)
    cx = (x1 + x2) / 2 + rng.uniform(-augment.translate, augment.translate) * w
    cy = (y1 + y2) / 2 + rng.uniform(-augment.translate, augment.translate) * h
    return np.array([cx - grow * w / 2, cy - grow * h / 2, cx + grow * w / 2, cy + grow * h / 2], np.float32)


NO_AUGMENT = CropAugment(fliplr=0.0, flipud=0.0, hsv_h=0.0, hsv_s=0.0, hsv_v=0.0, scale=0.0, translate=0.0)


def to_tensor(crop: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 RGB -> (3, H, W) uint8 tensor."""
    return torch.from_numpy(np.ascontiguousarray(crop.transpose(2, 0, 1)))


class PatchDataset(Dataset):
    """Augmented training crops of `patches` (see the module docstring); call `set_epoch` every epoch."""

    def __init__(
        self, patches: Sequence[ObjectPatch], *, size: int, context: float, augment: CropAugment, seed: int = 0
    ) -> None:
        self.patches, self.size, self.context, self.augment, self.seed = list(patches), size, context, augment, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.patches)

    @property
    def labels(self) -> np.ndarray:
        return np.array([p.label for p in self.patches], np.int64)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        patch, aug = self.patches[index], self.augment
        rng = np.random.default_rng([self.seed, self.epoch, index])
        ph, pw = patch.pixels.shape[:2]
        region = context_regions(jitter_box(patch.box, aug, rng)[None], context=self.context, width=pw, height=ph)
        crop = cut_crops(patch.pixels, region, size=self.size)[0]
        if rng.random() < aug.fliplr:
            crop = crop[:, ::-1]
        if rng.random() < aug.flipud:
            crop = crop[::-1]
        crop = augment_hsv(np.ascontiguousarray(crop), rng, hgain=aug.hsv_h, sgain=aug.hsv_s, vgain=aug.hsv_v,
                           rgb_out=True)  # fmt: skip
        return to_tensor(crop), patch.label


class CropSetDataset(Dataset):
    """The fixed crops of a `CropSet` (validation: what inference would classify), as RGB tensors."""

    def __init__(self, crops: CropSet) -> None:
        self.crops = crops

    def __len__(self) -> int:
        return len(self.crops)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return to_tensor(self.crops.crops[index][..., ::-1]), int(self.crops.labels[index])

"""Geometric and photometric augmentation on uint8 BGR images with pixel xyxy boxes.

Every function takes its random generator as an argument (`np.random.Generator`), so a sample is
reproducible from its seed. Ignore regions go through the same geometry as the boxes but are never
filtered by `box_candidates` (only regions left with no area are dropped).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import cv2
import numpy as np

from tphyolo.data.letterbox import PAD_VALUE


@dataclass(frozen=True)
class Hyp:
    """Augmentation hyperparameters (YOLOv5 key names and default values of its scratch recipe).

    hsv_*: gains of the HSV jitter; degrees, translate (fraction), scale (+/- gain), shear (degrees),
    perspective: random affine/perspective; flipud, fliplr, mosaic, mixup: probabilities.
    The original's `copy_paste` is not a field: it pastes segments, and on box labels it does nothing, so
    `from_dict` ignores it as it ignores the non-augmentation keys (the hyp loader warns when it is set).
    """

    hsv_h: float = 0.015
    hsv_s: float = 0.7
    hsv_v: float = 0.4
    degrees: float = 0.0
    translate: float = 0.1
    scale: float = 0.5
    shear: float = 0.0
    perspective: float = 0.0
    flipud: float = 0.0
    fliplr: float = 0.5
    mosaic: float = 1.0
    mixup: float = 0.0

    @classmethod
    def from_dict(cls, hyp: dict) -> Hyp:
        """Take the augmentation keys of a full YOLOv5 hyp dict (lr0, box, ... are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: float(v) for k, v in hyp.items() if k in known})


NO_AUGMENT = Hyp(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


def augment_hsv(
    image: np.ndarray, rng: np.random.Generator, *, hgain: float, sgain: float, vgain: float, rgb_out: bool = False
) -> np.ndarray:
    """Random hue/saturation/value gains on a uint8 BGR image (lookup tables). Returns a new image, in RGB
    order when `rgb_out` (saves a separate channel swap); the input is left unchanged."""
    if not (hgain or sgain or vgain):
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB) if rgb_out else image.copy()
    gain = rng.uniform(-1, 1, 3) * (hgain, sgain, vgain) + 1
    hue, sat, val = cv2.split(cv2.cvtColor(image, cv2.COLOR_BGR2HSV))
    x = np.arange(256, dtype=np.int16)
    lut_hue = ((x * gain[0]) % 180).astype(np.uint8)
    lut_sat = np.clip(x * gain[1], 0, 255).astype(np.uint8)
    lut_val = np.clip(x * gain[2], 0, 255).astype(np.uint8)
    hsv = cv2.merge((cv2.LUT(hue, lut_hue), cv2.LUT(sat, lut_sat), cv2.LUT(val, lut_val)))
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB if rgb_out else cv2.COLOR_HSV2BGR)


def box_candidates(
    before: np.ndarray, after: np.ndarray, *, wh_thr: float = 2, ar_thr: float = 20, area_thr: float = 0.1
) -> np.ndarray:
    """(n,) bool: boxes kept after a transform. before/after: (n, 4) xyxy (before already scaled by the
    transform's zoom). Kept when both sides > wh_thr pixels, area after / before > area_thr and the aspect
    ratio max(w/h, h/w) < ar_thr (the thresholds of the original TPH-YOLOv5 / YOLOv5 v6.0 code)."""
    eps = 1e-16
    w1, h1 = before[:, 2] - before[:, 0], before[:, 3] - before[:, 1]
    w2, h2 = after[:, 2] - after[:, 0], after[:, 3] - after[:, 1]
    ar = np.maximum(w2 / (h2 + eps), h2 / (w2 + eps))
    return (w2 > wh_thr) & (h2 > wh_thr) & (w2 * h2 / (w1 * h1 + eps) > area_thr) & (ar < ar_thr)


def perspective_matrix(
    rng: np.random.Generator,
    *,
    in_hw: tuple[int, int],
    out_hw: tuple[int, int],
    degrees: float,
    translate: float,
    scale: float,
    shear: float,
    perspective: float,
) -> tuple[np.ndarray, float]:
    """(3, 3) matrix mapping input pixels to output pixels, and its zoom factor.

    Order: centre the input, perspective, rotate + scale, shear, translate to the output centre +/- translate.
    """
    c = np.eye(3)
    c[0, 2], c[1, 2] = -in_hw[1] / 2, -in_hw[0] / 2
    p = np.eye(3)
    p[2, 0], p[2, 1] = rng.uniform(-perspective, perspective, 2)
    r = np.eye(3)
    angle = rng.uniform(-degrees, degrees)
    zoom = rng.uniform(1 - scale, 1 + scale)
    r[:2] = cv2.getRotationMatrix2D(center=(0, 0), angle=angle, scale=zoom)
    s = np.eye(3)
    s[0, 1], s[1, 0] = np.tan(rng.uniform(-shear, shear, 2) * math.pi / 180)
    t = np.eye(3)
    t[0, 2] = rng.uniform(0.5 - translate, 0.5 + translate) * out_hw[1]
    t[1, 2] = rng.uniform(0.5 - translate, 0.5 + translate) * out_hw[0]
    return t @ s @ r @ p @ c, zoom


def transform_boxes(boxes: np.ndarray, m: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    """(n, 4) xyxy -> (n, 4) xyxy enclosing the 4 transformed corners, clipped to the out_hw image."""
    n = len(boxes)
    if n == 0:
        return boxes.reshape(0, 4).astype(np.float32)
    xy = np.ones((n * 4, 3))
    xy[:, :2] = boxes[:, [0, 1, 2, 3, 0, 3, 2, 1]].reshape(n * 4, 2)
    xy = xy @ m.T
    xy = (xy[:, :2] / xy[:, 2:3]).reshape(n, 8)
    x, y = xy[:, [0, 2, 4, 6]], xy[:, [1, 3, 5, 7]]
    out = np.stack([x.min(1), y.min(1), x.max(1), y.max(1)], axis=1)
    out[:, [0, 2]] = out[:, [0, 2]].clip(0, out_hw[1])
    out[:, [1, 3]] = out[:, [1, 3]].clip(0, out_hw[0])
    return out.astype(np.float32)


@dataclass(frozen=True)
class Warp:
    """A drawn geometric transform: `matrix` (3, 3) maps input pixels to output pixels of size `out_hw`;
    `zoom` is its scale factor (for box filtering); `projective` selects warpPerspective over warpAffine."""

    matrix: np.ndarray
    zoom: float
    out_hw: tuple[int, int]
    projective: bool


def draw_warp(
    rng: np.random.Generator,
    hyp: Hyp,
    *,
    in_hw: tuple[int, int],
    out_hw: tuple[int, int],
    flip_lr: bool = False,
    flip_ud: bool = False,
) -> Warp:
    """A random affine/perspective transform per `hyp`; flip_lr / flip_ud mirror the output, folded into
    the same matrix (no extra pass over the pixels)."""
    m, zoom = perspective_matrix(
        rng,
        in_hw=in_hw,
        out_hw=out_hw,
        degrees=hyp.degrees,
        translate=hyp.translate,
        scale=hyp.scale,
        shear=hyp.shear,
        perspective=hyp.perspective,
    )
    mirror = np.eye(3)
    if flip_lr:
        mirror[0, 0], mirror[0, 2] = -1, out_hw[1]
    if flip_ud:
        mirror[1, 1], mirror[1, 2] = -1, out_hw[0]
    return Warp(mirror @ m, zoom, out_hw, bool(hyp.perspective))


def source_window(warp: Warp, in_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """(x1, y1, x2, y2) integer part of an in_hw input that the output of `warp` reads (1 px margin for
    interpolation), so that only that part needs to exist (e.g. of a large mosaic canvas)."""
    h, w = warp.out_hw
    corners = np.array([[0, 0, 1], [w, 0, 1], [0, h, 1], [w, h, 1]], dtype=np.float64)
    back = corners @ np.linalg.inv(warp.matrix).T
    xy = back[:, :2] / back[:, 2:3]
    x1, y1 = np.floor(xy.min(0)).astype(int) - 1
    x2, y2 = np.ceil(xy.max(0)).astype(int) + 2
    return max(0, x1), max(0, y1), min(in_hw[1], x2), min(in_hw[0], y2)


def apply_warp(
    image: np.ndarray, boxes: np.ndarray, ignore: np.ndarray, warp: Warp, *, origin: tuple[int, int] = (0, 0)
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Warp `image`, whose pixel (0, 0) sits at `origin` (x, y) of the frame that `warp` and the boxes use.

    Returns (image (out_h, out_w, 3), keep (n,) indices of surviving boxes, their new boxes (len(keep), 4),
    new ignore regions (k', 4)); all xyxy output pixels. Boxes are filtered by `box_candidates`."""
    m = warp.matrix
    if origin != (0, 0):
        shift = np.eye(3)
        shift[0, 2], shift[1, 2] = origin
        m_image = m @ shift
    else:
        m_image = m
    out_h, out_w = warp.out_hw
    if image.shape[:2] != (out_h, out_w) or not np.allclose(m_image, np.eye(3)):
        size, fill = (out_w, out_h), (PAD_VALUE,) * 3
        if warp.projective:
            image = cv2.warpPerspective(image, m_image, dsize=size, borderValue=fill)
        else:
            image = cv2.warpAffine(image, m_image[:2], dsize=size, borderValue=fill)
    new = transform_boxes(boxes, m, warp.out_hw)
    keep = np.nonzero(box_candidates(boxes * warp.zoom, new))[0]
    new_ignore = transform_boxes(ignore, m, warp.out_hw)
    new_ignore = new_ignore[(new_ignore[:, 2] > new_ignore[:, 0]) & (new_ignore[:, 3] > new_ignore[:, 1])]
    return image, keep, new[keep], new_ignore


def random_perspective(
    image: np.ndarray,
    boxes: np.ndarray,
    ignore: np.ndarray,
    rng: np.random.Generator,
    hyp: Hyp,
    *,
    border: int = 0,
    flip_lr: bool = False,
    flip_ud: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Draw a warp (`draw_warp`) and apply it (`apply_warp`). Output size: input size + 2 * border
    (border < 0 crops, e.g. a 2s mosaic to s)."""
    in_hw = image.shape[:2]
    out_hw = (in_hw[0] + 2 * border, in_hw[1] + 2 * border)
    warp = draw_warp(rng, hyp, in_hw=in_hw, out_hw=out_hw, flip_lr=flip_lr, flip_ud=flip_ud)
    return apply_warp(image, boxes, ignore, warp)


def mixup_weight(rng: np.random.Generator) -> float:
    """Blend weight of the first image in MixUp, Beta(32, 32) (mostly near 0.5)."""
    return float(rng.beta(32.0, 32.0))


def mixup_images(a: np.ndarray, b: np.ndarray, weight: float) -> np.ndarray:
    """weight * a + (1 - weight) * b for same-shape uint8 images; labels of both are kept by the caller."""
    return cv2.addWeighted(a, weight, b, 1.0 - weight, 0.0)


def fill_regions(image: np.ndarray, regions: np.ndarray, value: int = PAD_VALUE) -> None:
    """Paint (k, 4) xyxy pixel regions with grey `value`, in place (pixels whose area the region covers
    at least half-way, i.e. rounded edges)."""
    h, w = image.shape[:2]
    for x1, y1, x2, y2 in np.round(regions).astype(int).tolist():
        image[max(y1, 0) : min(y2, h), max(x1, 0) : min(x2, w)] = value

"""A procedural drone-view dataset whose confusable classes differ only in a detail seen at full resolution.

Scenes are 1280 px: the ground, roads and car / pedestrian drawings of `tphyolo.data.builtin.synthetic` (at twice their
640 px size) plus two confusable classes, `tricycle` and `awning-tricycle`. Both are drawn the same way -- a
body of one colour (same distribution for both classes), a dark seat block at one end, a shadow -- and the
awning-tricycle's canopy (the rest of the body) carries a stripe pattern of period 2 px: lines along the long
axis, alternately `STRIPE_CONTRAST` brighter and darker than the body colour. The stripes average out to exactly
the body colour, so at the detector's input size (320 px, a quarter of the scene) the two classes look
alike; at full resolution the stripes are plain to see. The data yaml lists them under `confusable:`.

Written in VisDrone-DET format (images/ + annotations/), JPEG quality 95 (the stripes are luminance only, so
chroma subsampling leaves them). The output depends only on the arguments (same seed, same bytes).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import yaml

from tphyolo.data.builtin.synthetic import _draw_object, _ground, _roads, default_cache_dir, generated_once
from tphyolo.data.categories import CategoryTable
from tphyolo.data.files.image_io import write_image
from tphyolo.data.formats.visdrone import format_visdrone
from tphyolo.data.labels import ImageLabels

GENERATOR_VERSION = 1
SCENE_SIZE = 1280
NAMES = ("car", "pedestrian", "tricycle", "awning-tricycle")
CONFUSABLE = ("tricycle", "awning-tricycle")
STRIPE_CONTRAST = 40  # grey levels above / below the body colour of alternate canopy lines
# class id here -> class id of `tphyolo.data.builtin.synthetic` whose drawing (and 640 px size) is reused
_BORROWED = {0: 0, 1: 2}
_BORROWED_SIZES = {0: ((22, 34), (0.45, 0.6)), 1: ((9, 15), (1.0, 1.0))}  # at 640 px, as synthetic's _SIZES
_TRICYCLE_LONG, _TRICYCLE_RATIO = (44, 64), (0.6, 0.8)  # at SCENE_SIZE
_OBJECTS_PER_SCENE = {0: (3, 7), 1: (3, 7), 2: (3, 6), 3: (3, 6)}  # per class, inclusive range


def _tricycle_colour(rng: np.random.Generator) -> np.ndarray:
    """Body colour (BGR): a warm orange with per-object jitter, kept inside [CONTRAST, 255 - CONTRAST]."""
    base = np.array([50, 140, 200]) + rng.integers(-20, 21, 3)
    return np.clip(base, STRIPE_CONTRAST + 5, 250 - STRIPE_CONTRAST)


def draw_tricycle(image: np.ndarray, box: tuple[int, int, int, int], *, striped: bool, rng) -> None:
    """Paint a (plain or awning) tricycle into `box` (x1, y1, x2, y2, pixels) of `image` in place.

    The seat (dark, a quarter of the length) sits at one end; the canopy fills the rest. With `striped` the
    canopy carries 1 px lines along the long axis, alternately +/- STRIPE_CONTRAST (random phase)."""
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    colour = _tricycle_colour(rng)
    seat_at_start = bool(rng.random() < 0.5)  # drawn before the stripes: both kinds use the same draws
    shadow = image[y1 + 3 : y2 + 4, x1 + 3 : x2 + 4]
    shadow[:] = (shadow * 0.55).astype(np.uint8)
    body = np.empty((h, w, 3), np.int16)
    body[:] = colour
    vertical = h > w
    if striped:  # lines along the long axis, alternating across the short one
        sign = np.where((np.arange(w if vertical else h) + int(rng.integers(0, 2))) % 2 == 0, 1, -1)
        offset = sign[None, :, None] if vertical else sign[:, None, None]
        body += (offset * STRIPE_CONTRAST).astype(np.int16)
    if vertical:
        seat = slice(0, h // 4) if seat_at_start else slice(h - h // 4, h)
        body[seat, :] = 35
    else:
        seat = slice(0, w // 4) if seat_at_start else slice(w - w // 4, w)
        body[:, seat] = 35
    image[y1:y2, x1:x2] = np.clip(body, 0, 255).astype(np.uint8)


def _size(cls: int, rng: np.random.Generator) -> tuple[int, int]:
    """(long, short) side in scene pixels."""
    if cls in _BORROWED_SIZES:
        (lo, hi), (a, b) = _BORROWED_SIZES[cls]
        scale = SCENE_SIZE / 640
        long = round(int(rng.integers(lo, hi + 1)) * scale)
        return long, max(4, round(long * rng.uniform(a, b)))
    long = int(rng.integers(_TRICYCLE_LONG[0], _TRICYCLE_LONG[1] + 1))
    return long, round(long * rng.uniform(*_TRICYCLE_RATIO))


def render_fine_scene(rng: np.random.Generator) -> tuple[np.ndarray, ImageLabels]:
    """One SCENE_SIZE scene: uint8 BGR (S, S, 3) and its labels (pixel xyxy, class ids into NAMES)."""
    size = SCENE_SIZE
    image = _ground(rng, size)
    free = np.ones((size, size), dtype=bool)
    _roads(image, rng, free)
    wanted = [c for c, (lo, hi) in _OBJECTS_PER_SCENE.items() for _ in range(int(rng.integers(lo, hi + 1)))]
    classes, boxes = [], []
    for cls in rng.permutation(wanted).tolist():
        long, short = _size(cls, rng)
        vertical = bool(rng.random() < 0.5)
        w, h = (short, long) if vertical else (long, short)
        for _attempt in range(30):
            x, y = int(rng.integers(0, size - w - 4)), int(rng.integers(0, size - h - 4))
            if free[max(0, y - 4) : y + h + 8, max(0, x - 4) : x + w + 8].all():
                free[y : y + h, x : x + w] = False
                if cls in _BORROWED:
                    _draw_object(image, _BORROWED[cls], (x, y, x + w, y + h), vertical, rng)
                else:
                    draw_tricycle(image, (x, y, x + w, y + h), striped=cls == NAMES.index("awning-tricycle"), rng=rng)
                classes.append(cls)
                boxes.append((x, y, x + w, y + h))
                break
    return image, ImageLabels(classes, np.array(boxes, np.float32))


def _write_image(images: Path, annotations: Path, split: str, i: int, seed: int) -> None:
    rng = np.random.default_rng([seed, GENERATOR_VERSION, 0 if split == "train" else 1, i])
    image, labels = render_fine_scene(rng)
    stem = f"{split}_{i:05d}"
    write_image(images / f"{stem}.jpg", image, (cv2.IMWRITE_JPEG_QUALITY, 95))
    (annotations / f"{stem}.txt").write_text(format_visdrone(labels), encoding="utf-8")


def generate_synthetic_fine(root: Path, *, n_train: int = 80, n_val: int = 20, seed: int = 0) -> Path:
    """Write the dataset under `root` (train/ and val/, each images/ + annotations/) and return its data yaml.

    Deterministic in (n_train, n_val, seed); the default 100 scenes take a few seconds."""
    root = Path(root)
    for split, n in (("train", n_train), ("val", n_val)):
        images, annotations = root / split / "images", root / split / "annotations"
        images.mkdir(parents=True, exist_ok=True)
        annotations.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            list(pool.map(lambda i, im=images, an=annotations, s=split: _write_image(im, an, s, i, seed), range(n)))
    data = {
        "path": ".",
        "train": "train/images",
        "val": "val/images",
        "nc": len(NAMES),
        "names": dict(enumerate(NAMES)),
        "categories": CategoryTable.numbered(NAMES).to_yaml(),  # what the annotation files number
        "recipe": "synthetic",
        "confusable": list(CONFUSABLE),
        "synthetic_fine": {"generator_version": GENERATOR_VERSION, "seed": seed, "scene_size": SCENE_SIZE},
    }
    path = root / "data.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def ensure_synthetic_fine(cache_dir: Path | None = None, *, n_train: int = 80, n_val: int = 20, seed: int = 0) -> Path:
    """The data yaml of the synthetic-fine dataset under `cache_dir` (default `~/.cache/tphyolo`), generated
    the first time (atomically: a partly written copy is never used)."""
    name = f"synthetic-fine-v{GENERATOR_VERSION}-s{seed}-{n_train}x{n_val}"
    return generated_once(
        Path(cache_dir or default_cache_dir()) / name,
        lambda root: generate_synthetic_fine(root, n_train=n_train, n_val=n_val, seed=seed),
    )

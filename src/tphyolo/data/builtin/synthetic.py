"""A procedural drone-view dataset for smoke tests and quick training runs.

Scenes: textured ground, roads with lane marks, building roofs and trees as distractors, 6 object classes
that differ in colour and shape (4-60 px, mostly 12-50 px at 640), some partly hidden under trees, and a
few ignore regions (dense crowds of unlabeled blobs). Written in VisDrone-DET format (images/ +
annotations/, ignore regions as category 0) so the default training path reads the real format; the
categories are class index + 1 in the order of `NAMES` (car 1, bus 2, ...), the table the data yaml declares
under `categories:` (`tphyolo.data.categories`).
The output depends only on the arguments (same seed, same bytes).

`large=True` writes large scenes instead (`render_large_scene`): 1536-2048 px wide, of VisDrone's aspect ratios,
whose objects follow VisDrone's sizes (nearly all under 32 px, many under 16: the case training on tiles is for).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import yaml

from tphyolo.data.categories import CategoryTable
from tphyolo.data.files.image_io import write_image
from tphyolo.data.formats.visdrone import format_visdrone
from tphyolo.data.labels import ImageLabels
from tphyolo.data.tile_settings import tile_labels
from tphyolo.user_cache import user_cache_dir

LOGGER = logging.getLogger("tphyolo.data")
GENERATOR_VERSION = 1
NAMES = ("car", "bus", "pedestrian", "truck", "motor", "van")
# (long side range, short / long ratio range) in pixels at imgsz 640, per class
_SIZES = {0: ((22, 34), (0.45, 0.6)), 1: ((42, 60), (0.3, 0.4)), 2: ((9, 15), (1.0, 1.0)),
          3: ((32, 46), (0.38, 0.5)), 4: ((13, 20), (0.9, 1.0)), 5: ((17, 25), (0.85, 1.0))}  # fmt: skip
_BGR = {0: (30, 30, 210), 1: (0, 215, 250), 2: (235, 110, 20), 3: (235, 235, 235), 4: (200, 40, 200), 5: (215, 210, 0)}


def _ground(rng: np.random.Generator, size: int) -> np.ndarray:
    base = np.array([rng.uniform(60, 90), rng.uniform(95, 130), rng.uniform(85, 115)], np.float32)  # BGR
    coarse = (rng.normal(0, 18, (8, 8, 1)) + rng.normal(0, 6, (8, 8, 3)) + base).astype(np.float32)
    image = cv2.resize(coarse, (size, size), interpolation=cv2.INTER_LINEAR)
    image = np.clip(image, 12, 243).astype(np.uint8)
    grain = rng.integers(-12, 13, (size, size, 3), dtype=np.int8)
    return (image + grain).astype(np.uint8)  # int16 sum, in 0..255 thanks to the clip above


def _roads(image: np.ndarray, rng: np.random.Generator, free: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Draw 1-3 straight roads; returns their (x1, y1, x2, y2, vertical) lanes for placing vehicles."""
    size = image.shape[0]
    roads = []
    for _ in range(int(rng.integers(1, 4))):
        vertical, width, pos = bool(rng.random() < 0.5), int(rng.integers(50, 80)), int(rng.integers(0, size - 80))
        x1, y1, x2, y2 = (pos, 0, pos + width, size) if vertical else (0, pos, size, pos + width)
        grey = int(rng.integers(70, 100))
        image[y1:y2, x1:x2] = grey + rng.normal(0, 4, (y2 - y1, x2 - x1, 1)).astype(np.int16).clip(-10, 10)
        mid = pos + width // 2
        for d in range(0, size, 40):
            if vertical:
                image[d : d + 20, mid - 1 : mid + 1] = 225
            else:
                image[mid - 1 : mid + 1, d : d + 20] = 225
        roads.append((x1, y1, x2, y2, int(vertical)))
    return roads


def _buildings_and_crowds(image, rng, free, n_ignore):
    size = image.shape[0]
    for _ in range(int(rng.integers(1, 5))):
        w, h = rng.integers(50, 140, 2)
        x, y = rng.integers(0, size - 140, 2)
        roof = rng.integers(120, 170) + rng.integers(-15, 15, 3)
        cv2.rectangle(image, (int(x), int(y)), (int(x + w), int(y + h)), roof.tolist(), -1)
        cv2.rectangle(image, (int(x), int(y)), (int(x + w), int(y + h)), (60, 60, 60), 2)
        free[y : y + h + 1, x : x + w + 1] = False
    ignore = []
    for _ in range(n_ignore):
        w, h = (int(v) for v in rng.integers(50, 110, 2))
        x, y = (int(v) for v in rng.integers(0, size - 110, 2))
        for _ in range(int(w * h / 60)):
            cx, cy = x + int(rng.integers(2, w - 2)), y + int(rng.integers(2, h - 2))
            cv2.circle(image, (cx, cy), int(rng.integers(1, 4)), rng.integers(0, 255, 3).tolist(), -1)
        free[y : y + h, x : x + w] = False
        ignore.append((x, y, x + w, y + h))
    return ignore


def _draw_object(image: np.ndarray, cls: int, box: tuple[int, int, int, int], vertical: bool, rng) -> None:
    x1, y1, x2, y2 = box
    colour = np.clip(np.array(_BGR[cls]) + rng.integers(-15, 16, 3), 0, 255).tolist()
    shadow = image[y1 + 2 : y2 + 3, x1 + 2 : x2 + 3]
    shadow[:] = (shadow * 0.55).astype(np.uint8)
    w, h = x2 - x1, y2 - y1
    if cls == 2:  # pedestrian: disc with a light head dot
        r = w // 2
        cv2.circle(image, (x1 + r, y1 + r), r, colour, -1)
        cv2.circle(image, (x1 + r, y1 + r), max(1, r // 3), (200, 220, 255), -1)
        return
    if cls == 4:  # motor: triangle pointing along the travel direction
        pts = (
            [(x1, y2 - 1), (x2 - 1, y2 - 1), (x1 + w // 2, y1)]
            if vertical
            else [(x1, y1), (x1, y2 - 1), (x2 - 1, y1 + h // 2)]
        )
        cv2.fillPoly(image, [np.array(pts, np.int32)], colour)
        return
    image[y1:y2, x1:x2] = colour
    if cls == 0:  # car: dark windscreen band at the front
        if vertical:
            image[y1 + h // 5 : y1 + 2 * h // 5, x1 + 2 : x2 - 2] = 40
        else:
            image[y1 + 2 : y2 - 2, x1 + w // 5 : x1 + 2 * w // 5] = 40
    elif cls == 1:  # bus: dark window stripe along its length
        if vertical:
            image[y1 + 3 : y2 - 3, x1 + w // 2 - 1 : x1 + w // 2 + 2] = 30
        else:
            image[y1 + h // 2 - 1 : y1 + h // 2 + 2, x1 + 3 : x2 - 3] = 30
    elif cls == 3:  # truck: orange cab at one end of a white box
        cab = (0, 130, 255)
        if vertical:
            image[y1 : y1 + h // 4, x1:x2] = cab
        else:
            image[y1:y2, x1 : x1 + w // 4] = cab
    elif cls == 5:  # van: black square frame inside
        cv2.rectangle(image, (x1 + w // 4, y1 + h // 4), (x2 - 1 - w // 4, y2 - 1 - h // 4), (20, 20, 20), 2)


def _object_box(cls: int, rng, vertical: bool, near=None) -> tuple[int, int, bool]:
    (lo, hi), (a, b) = _SIZES[cls]
    long = int(rng.integers(lo, hi + 1))
    short = max(4, round(long * rng.uniform(a, b)))
    if cls == 2 and rng.random() < 0.15:  # a few far-away pedestrians
        long = short = int(rng.integers(5, 9))
    w, h = (short, long) if vertical else (long, short)
    return w, h, vertical


def render_scene(
    rng: np.random.Generator, size: int = 640, *, object_scale: float | None = None
) -> tuple[np.ndarray, ImageLabels, list[int]]:
    """One scene: uint8 BGR (size, size, 3), its labels (pixel xyxy) and per-object occlusion levels (0/1).
    object_scale: object sizes relative to a 640 px scene (default size / 640)."""
    scale = size / 640 if object_scale is None else object_scale
    image = _ground(rng, size)
    free = np.ones((size, size), dtype=bool)
    roads = _roads(image, rng, free)
    ignore = _buildings_and_crowds(image, rng, free, int(rng.choice([0, 0, 1, 1, 2])))
    classes, boxes = [], []
    for _ in range(int(rng.integers(8, 22))):
        cls = int(rng.integers(0, len(NAMES)))
        on_road = cls in (0, 1, 3, 4, 5) and rng.random() < 0.7 and roads
        for _attempt in range(20):
            if on_road:
                rx1, ry1, rx2, ry2, vertical = roads[int(rng.integers(0, len(roads)))]
                w, h, _ = _object_box(cls, rng, bool(vertical))
                w, h = max(4, round(w * scale)), max(4, round(h * scale))
                x = (
                    int(rng.integers(rx1 + 2, max(rx1 + 3, rx2 - w - 2)))
                    if vertical
                    else int(rng.integers(0, size - w))
                )
                y = (
                    int(rng.integers(0, size - h))
                    if vertical
                    else int(rng.integers(ry1 + 2, max(ry1 + 3, ry2 - h - 2)))
                )
            else:
                w, h, _ = _object_box(cls, rng, bool(rng.random() < 0.5))
                w, h = max(4, round(w * scale)), max(4, round(h * scale))
                x, y = int(rng.integers(0, size - w - 3)), int(rng.integers(0, size - h - 3))
            x, y = min(x, size - w - 3), min(y, size - h - 3)
            if free[max(0, y - 3) : y + h + 3, max(0, x - 3) : x + w + 3].all():
                free[y : y + h, x : x + w] = False
                _draw_object(image, cls, (x, y, x + w, y + h), h > w, rng)
                classes.append(cls)
                boxes.append((x, y, x + w, y + h))
                break
    occlusion = []
    for x1, y1, x2, y2 in boxes:  # trees hiding at most ~35 % of some objects
        if rng.random() < 0.15:
            r = max(3, int(0.35 * min(x2 - x1, y2 - y1) + 2))
            cx, cy = (x1 if rng.random() < 0.5 else x2), int(rng.integers(y1, y2))
            cv2.circle(image, (int(cx), cy), r, (35, 85, 40), -1, cv2.LINE_AA)
            occlusion.append(1)
        else:
            occlusion.append(0)
    for _ in range(int(rng.integers(3, 10))):  # free-standing trees as distractors
        cx, cy = (int(v) for v in rng.integers(0, size, 2))
        if free[cy, cx]:
            cv2.circle(image, (cx, cy), int(rng.integers(8, 22) * scale), (35, 85, 40), -1, cv2.LINE_AA)
    gain = rng.uniform(0.85, 1.15)
    image = cv2.convertScaleAbs(image, alpha=gain)
    return image, ImageLabels(classes, np.array(boxes, np.float32), np.array(ignore, np.float32)), occlusion


LARGE_WIDTH = (1536, 2048)  # the large scenes' widths, pixels
LARGE_ASPECT = (0.5625, 0.75)  # their height / width: VisDrone's 16:9 to 4:3
LARGE_OBJECT_SCALE = (0.4, 1.5)  # object sizes per 640 px patch, relative to a 640 px scene
LARGE_SET = {"n_train": 32, "n_val": 8}  # the built-in 'synthetic-large'


def render_large_scene(rng: np.random.Generator) -> tuple[np.ndarray, ImageLabels, list[int]]:
    """A large scene (module docstring): 640 px patches of `render_scene`, each with objects at a scale drawn from
    LARGE_OBJECT_SCALE, side by side, cut to a width in LARGE_WIDTH and a height of LARGE_ASPECT. Objects the cut
    leaves less than whole become ignore regions (`tile_labels`)."""
    width = int(rng.integers(LARGE_WIDTH[0], LARGE_WIDTH[1] + 1))
    height = round(width * rng.uniform(*LARGE_ASPECT))
    rows, cols = -(-height // 640), -(-width // 640)
    image = np.zeros((rows * 640, cols * 640, 3), np.uint8)
    classes, boxes, ignore, occlusion = [], [], [], []
    for r in range(rows):
        for c in range(cols):
            patch, labels, occluded = render_scene(rng, 640, object_scale=float(rng.uniform(*LARGE_OBJECT_SCALE)))
            image[r * 640 : (r + 1) * 640, c * 640 : (c + 1) * 640] = patch
            shift = np.array([c * 640, r * 640] * 2, np.float32)
            classes.append(labels.classes)
            boxes.append(labels.boxes.reshape(-1, 4) + shift)
            ignore.append(labels.ignore.reshape(-1, 4) + shift)
            occlusion += occluded
    whole = ImageLabels(np.concatenate(classes), np.concatenate(boxes), np.concatenate(ignore))
    cut = tile_labels(whole, (0, 0, width, height), min_visible=1.0)
    inside = (whole.boxes[:, 2] <= width) & (whole.boxes[:, 3] <= height)  # the objects `tile_labels` kept
    return np.ascontiguousarray(image[:height, :width]), cut, [o for o, k in zip(occlusion, inside, strict=True) if k]


def split_scene(
    split: str, i: int, *, imgsz: int, seed: int = 0, large: bool = False
) -> tuple[np.ndarray, ImageLabels, list[int]]:
    """The `i`-th scene of `split` ("train" or "val") of the set `generate_synthetic(seed=seed, imgsz=imgsz,
    large=large)` writes, rendered in memory: as `render_scene` (`render_large_scene`) returns it (before the JPEG
    encoding of the written file)."""
    rng = np.random.default_rng([seed, GENERATOR_VERSION, 0 if split == "train" else 1, i])
    return render_large_scene(rng) if large else render_scene(rng, imgsz)


def _write_image(images: Path, annotations: Path, split: str, i: int, imgsz: int, seed: int, large: bool) -> None:
    image, labels, occlusion = split_scene(split, i, imgsz=imgsz, seed=seed, large=large)
    stem = f"{split}_{i:05d}"
    write_image(images / f"{stem}.jpg", image, (cv2.IMWRITE_JPEG_QUALITY, 92))
    lines = format_visdrone(labels).splitlines()
    k = len(labels.ignore)
    lines[k:] = [line[: line.rfind(",")] + f",{occ}" for line, occ in zip(lines[k:], occlusion, strict=True)]
    (annotations / f"{stem}.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _write_split(root: Path, split: str, n: int, imgsz: int, seed: int, large: bool) -> None:
    images, annotations = root / split / "images", root / split / "annotations"
    images.mkdir(parents=True, exist_ok=True)
    annotations.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        list(pool.map(lambda i: _write_image(images, annotations, split, i, imgsz, seed, large), range(n)))


def generate_synthetic(
    root: Path, *, n_train: int = 80, n_val: int = 20, imgsz: int = 640, seed: int = 0, large: bool = False
) -> Path:
    """Write the dataset under `root` (train/ and val/, each images/ + annotations/) and return its data yaml.
    large: the large scenes (module docstring; `imgsz` unused).

    Deterministic in (n_train, n_val, imgsz, seed, large); about 100 images at 640 take a few seconds."""
    root = Path(root)
    _write_split(root, "train", n_train, imgsz, seed, large)
    _write_split(root, "val", n_val, imgsz, seed, large)
    data = {
        "path": ".",
        "train": "train/images",
        "val": "val/images",
        "nc": len(NAMES),
        "names": dict(enumerate(NAMES)),
        "categories": CategoryTable.numbered(NAMES).to_yaml(),  # what the annotation files number
        "recipe": "synthetic",
        "synthetic": {"generator_version": GENERATOR_VERSION, "seed": seed, "imgsz": imgsz, "large": large},
    }
    path = root / "data.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def default_cache_dir() -> Path:
    """Where generated sets live: the user cache (`tphyolo.user_cache.user_cache_dir`)."""
    return user_cache_dir()


def ensure_synthetic(
    cache_dir: Path | None = None, *, n_train: int = 80, n_val: int = 20, imgsz: int = 640, seed: int = 0,
    large: bool = False,
) -> Path:  # fmt: skip
    """The data yaml of the synthetic dataset under `cache_dir`, generating it the first time (atomically:
    a partly written copy is never used)."""
    name = f"synthetic-v{GENERATOR_VERSION}-s{seed}-{n_train}x{n_val}-{'large' if large else imgsz}"
    return generated_once(
        Path(cache_dir or default_cache_dir()) / name,
        lambda root: generate_synthetic(root, n_train=n_train, n_val=n_val, imgsz=imgsz, seed=seed, large=large),
    )


def generated_once(final: Path, generate: Callable[[Path], object]) -> Path:
    """`final / "data.yaml"`, running `generate(folder)` the first time into a temporary folder beside `final`
    that is then renamed to it: a partly written set is never used, and when several processes generate at
    once the first rename wins and the others' copies are removed."""
    if (final / "data.yaml").is_file():
        return final / "data.yaml"
    LOGGER.info("generating the built-in dataset %s (once: a few seconds) ...", final)
    start = time.perf_counter()
    tmp = final.with_name(f"{final.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    generate(tmp)
    LOGGER.info("generated %s in %.1f s", final.name, time.perf_counter() - start)
    try:
        os.replace(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process finished first
        if not (final / "data.yaml").is_file():
            raise
    return final / "data.yaml"

"""A procedural drone-video set for multi-object tracking: small moving objects with true identities, filmed by
a moving camera.

Each sequence is a world (the textured ground, roads and object drawings of `tphyolo.data.synthetic`) in which
vehicles drive along the roads (entering at one end, leaving at the other, one speed per lane), pedestrians
walk, and a few "others" objects stand; trees and a bridge hide what passes under them, and a crowd patch is an
ignored region. A drone camera films it: it pans with changing speed and a jitter, zooms in and out and turns
slowly (`CameraPath`); the true frame-to-frame motion is known, and so is every object's ground speed
(`simulate_sequence`: world pixels per frame, `WORLD_GSD` metres per world pixel, filmed at `FPS`).

Layout of a split (VisDrone-MOT's, plus the same frames for detection):

    <split>/sequences/<seq>/0000001.jpg ...          frames
    <split>/annotations/<seq>.txt                    VisDrone-MOT ground truth (ids, categories, levels)
    <split>/images/<seq>/0000001.jpg ...             the same files (hard links), for `train` / `val`
    <split>/annotations/<seq>/0000001.txt ...        VisDrone-DET labels of each frame

Categories are VisDrone's (pedestrian 1, car 4, van 5, truck 6, bus 9, motor 10, others 11, ignored region 0),
truncation 0-1 and occlusion 0-2 levels as VisDrone defines them; a box more than half outside the frame or more
than `HIDDEN` covered is not annotated. The output depends only on the arguments (same seed, same bytes).
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import yaml

from tphyolo.data.builtin.synthetic import _SIZES, _draw_object, _ground, _roads, default_cache_dir, generated_once
from tphyolo.data.categories import VISDRONE
from tphyolo.data.files.image_io import write_image
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.data.formats.visdrone import format_visdrone
from tphyolo.data.labels import ImageLabels
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.visdrone_mot import IGNORED_REGION, OTHERS, format_visdrone_mot

GENERATOR_VERSION = 1
FRAME_SIZE = (640, 384)  # width, height
WORLD_SIZE = 1280
HIDDEN = 0.8  # a box covered more than this is not annotated
# synthetic.py's drawings (class id there) -> VisDrone category
CATEGORY = {0: 4, 1: 9, 2: 1, 3: 6, 4: 10, 5: 5}
_VEHICLES = (0, 0, 0, 1, 3, 4, 5)  # drawn classes of vehicles, cars most often
_OTHERS_BGR = (150, 150, 160)
FPS = 25.0  # the frame rate the sequences stand for
WORLD_GSD = 0.15  # metres per world pixel: a car of 22-34 px is 3.3-5.1 m long


@dataclass(frozen=True)
class CameraPath:
    """Where the camera looks in frame t: centre (world pixels), zoom (frame pixels per world pixel) and
    rotation (degrees), smooth with a jitter; `affine(t)` maps world pixels to frame t's pixels."""

    centre: np.ndarray  # (T, 2)
    zoom: np.ndarray  # (T,)
    angle: np.ndarray  # (T,)

    @classmethod
    def random(cls, rng: np.random.Generator, length: int) -> CameraPath:
        velocity = np.cumsum(rng.normal(0, 0.6, (length, 2)), axis=0) + rng.uniform(-4, 4, 2)
        velocity = np.clip(velocity, -7, 7) + rng.normal(0, 1.5, (length, 2))  # steering plus jitter
        centre = WORLD_SIZE / 2 + np.cumsum(velocity, axis=0) - velocity.sum(0) / 2
        t = np.arange(length)
        zoom = 1.0 + 0.12 * np.sin(2 * np.pi * t / rng.uniform(40, 90) + rng.uniform(0, 6))
        angle = np.cumsum(rng.normal(0, 0.25, length)) + rng.uniform(-0.2, 0.2) * t
        return cls(np.clip(centre, 420, WORLD_SIZE - 420), zoom, angle)

    def affine(self, t: int) -> np.ndarray:
        affine = cv2.getRotationMatrix2D(tuple(float(c) for c in self.centre[t]), float(self.angle[t]),
                                         float(self.zoom[t]))  # fmt: skip
        affine[:, 2] += np.array(FRAME_SIZE) / 2 - self.centre[t]
        return affine


@dataclass(frozen=True)
class _Objects:
    """M objects: world box at frame 0 (M, 4) xyxy whole pixels, velocity (M, 2) per frame, VisDrone category,
    and each one's drawing as a sprite: drawn pixels = background * scale + offset, (h + 3, w + 3, 3) float32
    each (the object and its shadow, 3 px down and right)."""

    boxes: np.ndarray
    velocity: np.ndarray
    category: np.ndarray
    sprites: list[tuple[np.ndarray, np.ndarray]]

    def boxes_at(self, t: int) -> np.ndarray:
        """(M, 4) int world boxes in frame t (from 0)."""
        shift = np.round(self.velocity * t).astype(int)
        return self.boxes + np.tile(shift, 2)

    def draw(self, canvas: np.ndarray, k: int, x: int, y: int) -> None:
        """Paint object k with its top-left corner at (x, y) of `canvas`, in place."""
        scale, offset = self.sprites[k]
        patch = canvas[y : y + scale.shape[0], x : x + scale.shape[1]]
        patch[:] = (patch * scale + offset).astype(np.uint8)


def _sprite(cls: int, width: int, height: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(scale, offset) of one drawing: drawn on black and on white, each pixel is background * scale + offset
    (scale 0 where the object covers it, 0.55 in its shadow, 1 elsewhere)."""
    drawn = []
    for background in (0, 255):
        patch = np.full((height + 3, width + 3, 3), background, np.uint8)
        if cls < 0:  # others: a grey cart
            patch[:height, :width] = _OTHERS_BGR
            patch[2 : height - 2, 2 : width - 2] = 90
        else:
            _draw_object(patch, cls, (0, 0, width, height), height > width, np.random.default_rng(seed))
        drawn.append(patch.astype(np.float32))
    return (drawn[1] - drawn[0]) / 255, drawn[0]


def _size(cls: int, rng: np.random.Generator, vertical: bool) -> tuple[int, int]:
    (lo, hi), (a, b) = _SIZES[cls]
    long = int(rng.integers(lo, hi + 1))
    short = max(4, round(long * rng.uniform(a, b)))
    return (short, long) if vertical else (long, short)


def _world(rng: np.random.Generator) -> tuple[np.ndarray, list[tuple[int, ...]], _Objects, np.ndarray]:
    """(ground image, occluders (cx, cy, radius) trees and (x1, y1, x2, y2) bridges, the objects, the crowd's
    ignored region xyxy)."""
    ground = _ground(rng, WORLD_SIZE)
    free = np.ones((WORLD_SIZE, WORLD_SIZE), dtype=bool)
    roads = _roads(ground, rng, free)
    if len(roads) < 2:
        roads += _roads(ground, rng, free)
    objects = []  # (cls, box, velocity)
    for x1, y1, x2, y2, vertical in roads:
        width = x2 - x1 if vertical else y2 - y1
        for lane, direction in ((0.27, 1), (0.73, -1)):  # one speed per lane: no vehicle runs into another
            velocity = np.array([0.0, 1.0] if vertical else [1.0, 0.0]) * direction * rng.uniform(1.0, 3.5)
            lane_pos = (x1 if vertical else y1) + lane * width
            along = -200 + rng.uniform(0, 150)
            while along < WORLD_SIZE + 200:  # vehicles off the world drive in during the sequence
                cls = int(rng.choice(_VEHICLES))
                w, h = _size(cls, rng, bool(vertical))
                cx, cy = (lane_pos, along) if vertical else (along, lane_pos)
                objects.append((cls, [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], velocity))
                along += rng.uniform(60, 200)
    for _ in range(int(rng.integers(100, 150))):  # pedestrians and parked motors
        cls = int(rng.choice([2, 2, 2, 2, 2, 4]))
        w, h = _size(cls, rng, bool(rng.random() < 0.5))
        x, y = rng.uniform(100, WORLD_SIZE - 100, 2)
        objects.append((cls, [x, y, x + w, y + h], rng.normal(0, 0.6, 2) if cls == 2 else np.zeros(2)))
    for _ in range(6):  # others: carts, machines
        x, y = rng.uniform(100, WORLD_SIZE - 100, 2)
        objects.append((-1, [x, y, x + int(rng.integers(14, 26)), y + int(rng.integers(10, 18))], np.zeros(2)))
    cls, boxes, velocity = zip(*objects, strict=True)
    boxes = np.round(np.array(boxes)).astype(int)
    category = np.array([CATEGORY.get(c, OTHERS) for c in cls])
    seeds = rng.integers(1 << 30, size=len(cls)).tolist()
    sprites = [_sprite(c, x2 - x1, y2 - y1, seed) for c, (x1, y1, x2, y2), seed in zip(cls, boxes.tolist(), seeds,
                                                                                          strict=True)]  # fmt: skip
    crowd = rng.uniform(200, WORLD_SIZE - 300, 2)
    crowd = np.array([*crowd, *(crowd + rng.uniform(60, 110, 2))])
    for _ in range(160):
        cx, cy = rng.uniform(crowd[:2], crowd[2:])
        cv2.circle(ground, (int(cx), int(cy)), int(rng.integers(1, 4)), rng.integers(0, 255, 3).tolist(), -1)
    occluders = [(*rng.integers(0, WORLD_SIZE, 2).tolist(), int(rng.integers(10, 26)))
                 for _ in range(int(rng.integers(25, 40)))]  # trees  # fmt: skip
    x1, y1, x2, y2, vertical = roads[0]  # a bridge over the first road
    at = int(rng.integers(300, WORLD_SIZE - 340))
    occluders.append((x1 - 20, at, x2 + 20, at + 36) if vertical else (at, y1 - 20, at + 36, y2 + 20))
    return ground, occluders, _Objects(boxes, np.array(velocity), category, sprites), crowd


def _paint_occluders(image: np.ndarray, occluders: list[tuple[int, ...]], x0: int = 0, y0: int = 0) -> None:
    """Paint the trees and bridges, shifted by (-x0, -y0), into `image` (a colour image or a mask) in place."""
    colour = 1 if image.ndim == 2 else (35, 85, 40)
    for occluder in occluders:
        if len(occluder) == 3:
            cv2.circle(image, (occluder[0] - x0, occluder[1] - y0), occluder[2], colour, -1)
        else:
            cv2.rectangle(image, (occluder[0] - x0, occluder[1] - y0), (occluder[2] - x0 - 1, occluder[3] - y0 - 1),
                          colour, -1)  # fmt: skip


@dataclass(frozen=True)
class SimulatedSequence:
    """One sequence as `simulate_sequence` films it: `frames` (uint8 BGR, FRAME_SIZE; empty when not drawn), the
    ground truth `truth` (ids from 1; ignored regions as category 0 rows with id -1), the `camera` path, and per
    object id k (row k - 1) its world box in frame 0 `world_boxes` (M, 4) xyxy and its `velocity` (M, 2) in world
    pixels per frame (positions are rounded to whole world pixels in each frame)."""

    frames: list[np.ndarray]
    truth: TrackTable
    camera: CameraPath
    world_boxes: np.ndarray
    velocity: np.ndarray


def render_sequence(rng: np.random.Generator, length: int) -> tuple[list[np.ndarray], TrackTable, CameraPath]:
    """One sequence: `length` uint8 BGR frames (FRAME_SIZE), its ground truth (ids from 1; ignored regions as
    category 0 rows with id -1) and the camera path."""
    sequence = simulate_sequence(rng, length)
    return sequence.frames, sequence.truth, sequence.camera


def simulate_sequence(rng: np.random.Generator, length: int, *, draw: bool = True) -> SimulatedSequence:
    """One sequence of `length` frames with what is known about it (see `SimulatedSequence`); `draw=False` skips
    the frames (the same truth, much faster). The same `rng` state gives what `render_sequence` gives."""
    ground, occluders, objects, crowd = _world(rng)
    cover = np.zeros(ground.shape[:2], np.uint8)
    _paint_occluders(cover, occluders)
    camera = CameraPath.random(rng, length)
    limit = np.array(FRAME_SIZE * 2, float)
    frames, tables = [], []
    for t in range(length):
        affine = camera.affine(t)
        x0, y0, x1, y1 = _view(affine)  # the world region the frame shows, and a margin for whole objects
        boxes = objects.boxes_at(t)
        seen = (boxes[:, 0] >= x0) & (boxes[:, 1] >= y0) & (boxes[:, 2] + 3 <= x1) & (boxes[:, 3] + 3 <= y1)
        seen = np.flatnonzero(seen)
        if draw:
            frames.append(_draw_frame(ground, occluders, objects, boxes, seen, affine, (x0, y0, x1, y1)))
        hidden = np.array([cover[b:d, a:c].mean() for a, b, c, d in boxes[seen].tolist()]).reshape(-1)
        projected = _project(boxes[seen].astype(float), affine)
        clipped = np.clip(projected, 0, limit)
        inside = np.prod(clipped[:, 2:] - clipped[:, :2], axis=1).clip(0) / np.prod(
            projected[:, 2:] - projected[:, :2], axis=1
        )
        keep = (hidden <= HIDDEN) & (inside >= 0.5)
        occlusion = np.where(hidden < 0.01, 0, np.where(hidden <= 0.5, 1, 2))
        tables.append(TrackTable.from_columns(np.full(keep.sum(), t + 1), seen[keep] + 1, clipped[keep], None,
                                              objects.category[seen[keep]], truncation=inside[keep] < 0.999,
                                              occlusion=occlusion[keep]))  # fmt: skip
        region = np.clip(_project(crowd[None], affine), 0, limit)
        if (region[0, 2:] - region[0, :2]).min() > 4:
            tables.append(TrackTable.from_columns([t + 1], None, region, [0.0], [IGNORED_REGION], truncation=[0],
                                                  occlusion=[0]))  # fmt: skip
    return SimulatedSequence(frames, TrackTable.concatenate(tables), camera, objects.boxes.astype(float),
                             objects.velocity.astype(float))  # fmt: skip


def _draw_frame(ground, occluders, objects: _Objects, boxes, seen, affine, view) -> np.ndarray:
    """Frame pixels under `affine`: the `view` (x0, y0, x1, y1) of the ground with objects `seen` and occluders."""
    x0, y0, x1, y1 = view
    canvas = ground[y0:y1, x0:x1].copy()
    for k in seen.tolist():
        objects.draw(canvas, k, int(boxes[k, 0]) - x0, int(boxes[k, 1]) - y0)
    _paint_occluders(canvas, occluders, x0, y0)
    shifted = affine.copy()
    shifted[:, 2] += affine[:, :2] @ [x0, y0]  # crop pixels -> frame pixels
    return cv2.warpAffine(canvas, shifted, FRAME_SIZE, flags=cv2.INTER_LINEAR, borderValue=(60, 90, 80))


def _view(affine: np.ndarray, margin: int = 64) -> tuple[int, int, int, int]:
    """The world region (x0, y0, x1, y1, whole pixels inside the world) that frame pixels map from under
    `affine`, grown by `margin`: an object straddling its edge is outside the frame."""
    width, height = FRAME_SIZE
    corners = np.array([[0, 0, 1], [width, 0, 1], [0, height, 1], [width, height, 1]], float)
    world = corners @ cv2.invertAffineTransform(affine).T
    lo = np.clip(np.floor(world.min(0)) - margin, 0, WORLD_SIZE).astype(int)
    hi = np.clip(np.ceil(world.max(0)) + margin, 0, WORLD_SIZE).astype(int)
    return int(lo[0]), int(lo[1]), int(hi[0]), int(hi[1])


def _project(boxes: np.ndarray, affine: np.ndarray) -> np.ndarray:
    """(N, 4) the axis-aligned boxes around world boxes `boxes` (xyxy) mapped by `affine`."""
    corners = boxes[:, [[0, 1], [2, 1], [0, 3], [2, 3]]]  # (N, 4 corners, 2)
    mapped = corners @ affine[:, :2].T + affine[:, 2]
    return np.concatenate([mapped.min(1), mapped.max(1)], axis=1)


def _frame_labels(truth: TrackTable, frame: int) -> ImageLabels:
    rows = truth.select(truth.frames == frame)
    objects = (rows.classes >= 1) & (rows.classes <= len(VISDRONE_NAMES))
    ignore = (rows.classes == IGNORED_REGION) | (rows.classes == OTHERS)
    return ImageLabels(rows.classes[objects] - 1, rows.boxes[objects], rows.boxes[ignore])


def _write_sequence(root: Path, split: str, index: int, length: int, seed: int) -> None:
    rng = np.random.default_rng([seed, GENERATOR_VERSION, 0 if split == "train" else 1, index])
    frames, truth, _ = render_sequence(rng, length)
    name = f"{split}-{index:03d}"
    sequence, images = root / split / "sequences" / name, root / split / "images" / name
    labels = root / split / "annotations" / name
    for folder in (sequence, images, labels):
        folder.mkdir(parents=True, exist_ok=True)
    for t, frame in enumerate(frames, start=1):
        path = write_image(sequence / f"{t:07d}.jpg", frame, (cv2.IMWRITE_JPEG_QUALITY, 90))
        _link_or_copy(path, images / path.name)
        (labels / f"{t:07d}.txt").write_text(format_visdrone(_frame_labels(truth, t)), encoding="utf-8")
    (root / split / "annotations" / f"{name}.txt").write_text(format_visdrone_mot(truth), encoding="utf-8")


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copyfile(source, target)


def generate_synthetic_mot(
    root: Path, *, n_train: int = 4, n_val: int = 2, length: int = 60, seed: int = 0
) -> Path:
    """Write the set under `root` (train/ and val/ in the layout above) and return its data yaml, whose
    `tracking:` entry names each split's VisDrone-MOT folder. Deterministic in the arguments; the default 6
    sequences of 60 frames take a few seconds."""
    root = Path(root)
    jobs = [("train", i) for i in range(n_train)] + [("val", i) for i in range(n_val)]
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        list(pool.map(lambda job: _write_sequence(root, job[0], job[1], length, seed), jobs))
    data = {
        "path": ".",
        "train": "train/images",
        "val": "val/images",
        "nc": len(VISDRONE_NAMES),
        "names": dict(enumerate(VISDRONE_NAMES)),
        "categories": VISDRONE.to_yaml(),  # VisDrone's own numbers, as the files write them
        "recipe": "synthetic",
        "tracking": {"format": "visdrone-mot", "train": "train", "val": "val"},
        "synthetic_mot": {"generator_version": GENERATOR_VERSION, "seed": seed, "length": length},
    }
    path = root / "data.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def ensure_synthetic_mot(
    cache_dir: Path | None = None, *, n_train: int = 4, n_val: int = 2, length: int = 60, seed: int = 0
) -> Path:
    """The data yaml of the synthetic-mot set under `cache_dir` (default: the user cache), generated the first
    time (atomically: a partly written copy is never used)."""
    name = f"synthetic-mot-v{GENERATOR_VERSION}-s{seed}-{n_train}x{n_val}x{length}"
    return generated_once(
        Path(cache_dir or default_cache_dir()) / name,
        lambda root: generate_synthetic_mot(root, n_train=n_train, n_val=n_val, length=length, seed=seed),
    )

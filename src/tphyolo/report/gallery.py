"""The report's galleries: whole images with their errors drawn, and crops of the worst misses and false
positives per class, written as JPEG files.

Colours (one legend, `LEGEND`): objects that were found, true positives, false positives and misses; only
detections scoring at least `tphyolo.report.data.GALLERY_SCORE` are drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from tphyolo.data.files.image_io import read_image
from tphyolo.report.data import GALLERY_SCORE, ReportData
from tphyolo.report.matching import ImageMatch
from tphyolo.report.sizes import box_side

# name -> (BGR colour, line width factor)
LEGEND: dict[str, tuple[tuple[int, int, int], int]] = {
    "ground truth (found)": ((255, 160, 0), 1),
    "true positive": ((0, 200, 0), 1),
    "false positive": ((0, 0, 230), 2),
    "miss": ((255, 0, 255), 2),
}
GALLERY_IMAGES = 6  # images in each gallery
CROPS_PER_CLASS = 8
CROP_SIZE = 96
IMAGE_WIDTH = 960


@dataclass(frozen=True)
class Tile:
    """A written picture: file name (in the files folder), caption."""

    file: str
    caption: str


def _image(path: str, run_dir: Path) -> np.ndarray | None:
    """The image at `path` (relative paths from `run_dir`), or None when it cannot be read."""
    candidate = Path(path) if Path(path).is_absolute() else run_dir / path
    try:
        return read_image(candidate)
    except (OSError, ValueError):
        return None


def _rectangles(canvas: np.ndarray, boxes: np.ndarray, key: str, scale: float) -> None:
    colour, width = LEGEND[key]
    thickness = max(1, round(width * max(canvas.shape[:2]) / 800))
    for x1, y1, x2, y2 in (boxes * scale).round().astype(int).tolist():
        cv2.rectangle(canvas, (x1, y1), (x2, y2), colour, thickness, cv2.LINE_AA)


def draw_errors(image: np.ndarray, match: ImageMatch) -> np.ndarray:
    """A copy of `image` scaled to IMAGE_WIDTH wide (never up) with found objects, true positives, false
    positives and misses drawn in the LEGEND colours, misses and false positives on top."""
    h, w = image.shape[:2]
    scale = min(1.0, IMAGE_WIDTH / w)
    canvas = cv2.resize(image, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
    misses = match.misses(GALLERY_SCORE)
    _rectangles(canvas, match.gt_boxes[match.gt_counted & ~misses], "ground truth (found)", scale)
    _rectangles(canvas, match.det_rows[match.true_positives(GALLERY_SCORE), :4], "true positive", scale)
    _rectangles(canvas, match.det_rows[match.false_positives(GALLERY_SCORE), :4], "false positive", scale)
    _rectangles(canvas, match.gt_boxes[misses], "miss", scale)
    return canvas


def _crop(image: np.ndarray, box: np.ndarray, colour: tuple[int, int, int]) -> np.ndarray:
    """A CROP_SIZE square around `box` (xyxy) with as much context again on each side, the box drawn."""
    h, w = image.shape[:2]
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    half = max(8.0, float(max(box[2] - box[0], box[3] - box[1])))
    x1, y1 = int(max(0, cx - half)), int(max(0, cy - half))
    x2, y2 = int(min(w, cx + half)), int(min(h, cy + half))
    patch = image[y1 : max(y2, y1 + 1), x1 : max(x2, x1 + 1)]
    scale = CROP_SIZE / max(patch.shape[:2])
    patch = cv2.resize(patch, (max(1, round(patch.shape[1] * scale)), max(1, round(patch.shape[0] * scale))))
    canvas = np.full((CROP_SIZE, CROP_SIZE, 3), 255, dtype=np.uint8)
    canvas[: patch.shape[0], : patch.shape[1]] = patch
    corners = ((np.asarray(box[:4]) - [x1, y1, x1, y1]) * scale).round().astype(int).tolist()
    cv2.rectangle(canvas, tuple(corners[:2]), tuple(corners[2:]), colour, 1)
    return canvas


def _worst_images(data: ReportData, key: str) -> list[int]:
    counts = [getattr(e, key) for e in data.errors]
    order = sorted(range(len(counts)), key=lambda i: -counts[i])
    return [i for i in order if counts[i] > 0][:GALLERY_IMAGES]


def _crop_choices(data: ReportData, c: int) -> tuple[list, list]:
    """Class `c`'s worst misses (largest first) and false positives (highest score first), CROPS_PER_CLASS of
    each, as (label, image index, box xyxy)."""
    misses, fps = [], []  # (rank key, image index, box)
    for i, m in enumerate(data.matches):
        missed = np.flatnonzero(m.misses(GALLERY_SCORE) & (m.gt_classes == c))
        side = box_side(m.gt_boxes)
        misses += [(-side[g], i, m.gt_boxes[g]) for g in missed]
        wrong = np.flatnonzero(m.false_positives(GALLERY_SCORE) & (m.det_rows[:, 5] == c))
        fps += [(-m.det_rows[d, 4], i, m.det_rows[d, :4]) for d in wrong]

    def worst(items: list) -> list:
        return sorted(items, key=lambda t: (t[0], t[1]))[:CROPS_PER_CLASS]

    return (
        [(f"{-rank:.0f} px", i, box) for rank, i, box in worst(misses)],
        [(f"score {-rank:.2f}", i, box) for rank, i, box in worst(fps)],
    )


def write_galleries(data: ReportData, files_dir: Path, run_dir: Path) -> dict[str, list]:
    """Write the gallery pictures into `files_dir`, reading each image once. Returns {"misses": [Tile],
    "false_positives": [Tile], "crops": [(class name, [Tile] misses, [Tile] false positives)], "unreadable":
    [paths]}: images that could not be read are listed, not drawn."""
    files_dir.mkdir(parents=True, exist_ok=True)
    jobs: dict[int, list] = {}  # image index -> [(file name, draw(image) -> picture)]
    planned: dict[str, list] = {"misses": [], "false_positives": [], "crops": []}
    for key in ("misses", "false_positives"):
        for k, i in enumerate(_worst_images(data, key)):
            e, name = data.errors[i], f"{key}_{k}.jpg"
            caption = (
                f"{Path(e.path).name}: {e.objects} objects, {e.misses} missed, {e.false_positives} false positives"
            )
            jobs.setdefault(i, []).append((name, lambda image, m=data.matches[i]: draw_errors(image, m)))
            planned[key].append(Tile(name, caption))
    for c, class_name in enumerate(data.names):
        tiles: tuple[list[Tile], list[Tile]] = ([], [])
        kinds = (("miss", "miss"), ("fp", "false positive"))
        for (kind, legend), chosen, out in zip(kinds, _crop_choices(data, c), tiles, strict=True):
            for k, (label, i, box) in enumerate(chosen):
                name = f"crop_{c}_{kind}_{k}.jpg"
                jobs.setdefault(i, []).append((name, lambda image, b=box, col=LEGEND[legend][0]: _crop(image, b, col)))
                out.append(Tile(name, f"{Path(data.matches[i].path).name}, {label}"))
        if tiles[0] or tiles[1]:
            planned["crops"].append((str(class_name), *tiles))
    written, unreadable = set(), []
    for i in sorted(jobs):
        image = _image(data.matches[i].path, run_dir)
        if image is None:
            unreadable.append(data.matches[i].path)
            continue
        for name, draw in jobs[i]:
            cv2.imwrite(str(files_dir / name), draw(image), [cv2.IMWRITE_JPEG_QUALITY, 85])
            written.add(name)

    def kept(tiles: list[Tile]) -> list[Tile]:
        return [t for t in tiles if t.file in written]

    return {
        "misses": kept(planned["misses"]),
        "false_positives": kept(planned["false_positives"]),
        "crops": [(name, kept(m), kept(f)) for name, m, f in planned["crops"] if kept(m) or kept(f)],
        "unreadable": unreadable,
    }

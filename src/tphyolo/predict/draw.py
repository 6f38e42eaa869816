"""Drawing boxes on images, with one palette for every picture the package writes: predicted images and
videos, validation and training batches, and the class colours of the label statistics."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from tphyolo.ops.detections import Detections, class_name
from tphyolo.predict.draw_style import DEFAULT_STYLE, DrawStyle

PALETTE = np.array(
    [(56, 56, 255), (151, 157, 255), (31, 112, 255), (29, 178, 255), (49, 210, 207), (10, 249, 72), (23, 204, 146),
     (134, 219, 61), (52, 147, 26), (187, 212, 0), (168, 153, 44), (255, 194, 0), (147, 69, 52), (255, 115, 100),
     (236, 24, 0), (255, 56, 132), (133, 0, 82), (255, 56, 203), (200, 149, 255), (199, 55, 255)],
    dtype=np.uint8,
)  # BGR, one per class id modulo 20  # fmt: skip


def class_colour(index: int) -> tuple[int, int, int]:
    """The BGR colour of class `index` (the palette repeats every `len(PALETTE)` classes)."""
    b, g, r = PALETTE[int(index) % len(PALETTE)].tolist()
    return b, g, r


def draw_boxes(
    image: np.ndarray,
    boxes: np.ndarray | Sequence,
    classes: np.ndarray | Sequence,
    names: Sequence[str],
    *,
    scores: np.ndarray | Sequence | None = None,
    label_min_area: float = 0.0,
    labels: bool = True,
    line_width: int | None = None,
    ids: Sequence[int] | None = None,
) -> np.ndarray:
    """A copy of uint8 BGR `image` with `boxes` (n, 4) xyxy pixels drawn in their class's colour, each labelled
    `name score` (`name` when `scores` is None; the class id when `names` has no entry for it) unless its area is
    below `label_min_area` pixels or `labels` is False. With track `ids`, boxes take the colour of their id and
    labels start with it (`7 car 0.91`). Lines are `line_width` pixels wide (default: (height + width) / 1000,
    rounded, at least 1). Rows are drawn last to first, so the first rows (the best scores) end on top."""
    canvas = image.copy()
    thickness = line_width if line_width is not None else max(1, round(sum(image.shape[:2]) / 1000))
    font_scale = thickness / 3
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4).tolist()
    classes = np.asarray(classes).reshape(-1).astype(int).tolist()
    scores = None if scores is None else np.asarray(scores, dtype=np.float64).reshape(-1).tolist()
    for i in reversed(range(len(boxes))):
        x1, y1, x2, y2 = boxes[i]
        label = classes[i]
        colour = class_colour(label if ids is None else ids[i])
        p1, p2 = (round(x1), round(y1)), (round(x2), round(y2))
        cv2.rectangle(canvas, p1, p2, colour, thickness, cv2.LINE_AA)
        if not labels or (x2 - x1) * (y2 - y1) < label_min_area:
            continue
        text = class_name(names, label) if ids is None else f"{ids[i]} {class_name(names, label)}"
        text = text if scores is None else f"{text} {scores[i]:.2f}"
        (tw, th), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, 1)
        top = max(p1[1] - th - 3, 0)
        cv2.rectangle(canvas, (p1[0], top), (p1[0] + tw, top + th + 3), colour, -1, cv2.LINE_AA)
        cv2.putText(canvas, text, (p1[0], top + th + 1), cv2.FONT_HERSHEY_SIMPLEX, font_scale, (255, 255, 255), 1)
    return canvas


def draw_detections(
    image: np.ndarray,
    detections: Detections,
    names: Sequence[str],
    *,
    scores: bool = True,
    style: DrawStyle = DEFAULT_STYLE,
    ids: Sequence[int] | None = None,
) -> np.ndarray:
    """A copy of uint8 BGR `image` with each detection's box and `name score` (or `name`) drawn as `style` says,
    best on top (detections come sorted by descending score); with track `ids`, coloured and labelled by id."""
    return draw_boxes(
        image,
        detections.boxes.tolist(),
        detections.labels.tolist(),
        names,
        scores=detections.scores.tolist() if scores and not style.hide_conf else None,
        labels=not style.hide_labels,
        line_width=style.line_width,
        ids=ids,
    )


def image_grid(images: list[np.ndarray], *, cell: int = 480, columns: int = 4) -> np.ndarray:
    """Tile uint8 BGR images into one grid image, row by row, each resized to fit a `cell` x `cell` square;
    a row is as tall as its tallest image."""
    small = []
    for image in images:
        h, w = image.shape[:2]
        r = cell / max(h, w)
        small.append(cv2.resize(image, (max(1, round(w * r)), max(1, round(h * r))), interpolation=cv2.INTER_AREA))
    rows = [small[k : k + columns] for k in range(0, len(small), columns)]
    heights = [max(im.shape[0] for im in row) for row in rows]
    grid = np.full((sum(heights), min(columns, len(small)) * cell, 3), 255, dtype=np.uint8)
    top = 0
    for row, height in zip(rows, heights, strict=True):
        for k, im in enumerate(row):
            grid[top : top + im.shape[0], k * cell : k * cell + im.shape[1]] = im
        top += height
    return grid

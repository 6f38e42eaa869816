"""Pictures of the training data: the label statistics (labels.jpg) and batches with their boxes, in the
colours of `tphyolo.predict.draw`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import torch

from tphyolo.data.files.image_io import write_image
from tphyolo.ops.boxes import cxcywh_to_xyxy
from tphyolo.predict.draw import class_colour, draw_boxes

LABEL_MIN_AREA = 64  # pixels of a batch tile: smaller boxes are drawn without their class name


def plot_labels(classes: np.ndarray, boxes: np.ndarray, names: Sequence[str], out_path: Path) -> Path:
    """labels.jpg: instances per class, box centre positions and box sizes (normalised cx, cy, w, h)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 8), tight_layout=True)
    ax = fig.add_subplot(2, 2, 1)
    counts = np.bincount(classes.astype(int), minlength=len(names)) if len(classes) else np.zeros(len(names))
    ax.bar(range(len(names)), counts, color=[np.array(class_colour(i)[::-1]) / 255 for i in range(len(names))])
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=8)
    ax.set_ylabel("instances")
    panels = ((2, "x", "y", 0, 1), (3, "width", "height", 2, 3))
    for position, xlabel, ylabel, i, j in panels:
        ax = fig.add_subplot(2, 2, position)
        if len(boxes):
            ax.hist2d(boxes[:, i], boxes[:, j], bins=50, cmap="Blues")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    ax = fig.add_subplot(2, 2, 4)
    if len(boxes):
        ax.hist(np.sqrt(boxes[:, 2] * boxes[:, 3]), bins=50, color="tab:blue")
    ax.set_xlabel("sqrt(w * h), fraction of the image side")
    fig.savefig(out_path, dpi=100)
    return out_path


def plot_batch(
    images: torch.Tensor,
    targets: torch.Tensor,
    names: Sequence[str],
    out_path: Path,
    *,
    max_images: int = 16,
    max_side: int = 1920,
) -> Path:
    """A grid of the batch's images (uint8 (B, 3, H, W) RGB) with targets (n, 6) = image, class, cx, cy, w, h
    (normalised) drawn on them; a seventh column, if present, is a score."""
    images = images[:max_images].cpu()
    targets = targets.cpu().numpy()
    bs, _, h, w = images.shape
    ncols = math.ceil(bs**0.5)
    nrows = math.ceil(bs / ncols)
    scale = min(1.0, max_side / max(ncols * w, nrows * h))
    th, tw = int(h * scale), int(w * scale)
    canvas = np.full((nrows * th, ncols * tw, 3), 255, dtype=np.uint8)
    for i in range(bs):
        row, col = divmod(i, ncols)
        tile = np.ascontiguousarray(images[i].permute(1, 2, 0).numpy()[:, :, ::-1])  # RGB -> BGR
        tile = cv2.resize(tile, (tw, th), interpolation=cv2.INTER_AREA) if scale < 1 else tile
        rows = targets[targets[:, 0] == i]
        boxes = cxcywh_to_xyxy(rows[:, 2:6]) * (tw, th, tw, th)
        scores = rows[:, 6] if targets.shape[1] > 6 else None
        tile = draw_boxes(tile, boxes, rows[:, 1], names, scores=scores, label_min_area=LABEL_MIN_AREA)
        cv2.rectangle(tile, (0, 0), (tw - 1, th - 1), (255, 255, 255), 2)
        canvas[row * th : (row + 1) * th, col * tw : (col + 1) * tw] = tile
    write_image(out_path, canvas)
    return out_path

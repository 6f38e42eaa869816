"""A detector that really sees: it finds filled rectangles of its class colours in whatever input it gets (a
slice, a letterboxed full image), so sliced inference can be checked against the rectangles drawn. Not a test
module.

A rectangle whole inside the input scores 0.9; one touching the input's edge (cut by a window) scores 0.5, as a
real detector is less sure of a cut object.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch
from scipy import ndimage
from torch import nn

BLOCK_BGR = ((0, 0, 255), (0, 255, 0))  # class 0 red, class 1 green, on a black ground
NAMES = ["red", "green"]


class BlockFinder(nn.Module):
    """Eval output (B, N, 5 + 2): xywh in input pixels, objectness, one-hot class, of each filled rectangle."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("stride", torch.tensor([8.0, 16.0, 32.0]))
        self.names = list(NAMES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        found = [self._find(image.float().cpu().numpy()) for image in x]  # (3, H, W) RGB in [0, 1]
        out = torch.zeros(len(x), max(max((len(f) for f in found), default=1), 1), 7)
        for i, rows in enumerate(found):
            if rows:
                out[i, : len(rows)] = torch.tensor(rows, dtype=torch.float32)
        return out

    @staticmethod
    def _find(image: np.ndarray) -> list[list[float]]:
        _, h, w = image.shape
        rows = []
        for cls, bgr in enumerate(BLOCK_BGR):
            rgb = np.asarray(bgr[::-1], dtype=np.float32)[:, None, None] / 255
            mask = (np.abs(image - rgb) < 0.3).all(axis=0)
            labels, _ = ndimage.label(mask)
            for ys, xs in ndimage.find_objects(labels):
                x1, y1, x2, y2 = xs.start, ys.start, xs.stop, ys.stop
                cut = x1 == 0 or y1 == 0 or x2 == w or y2 == h
                one_hot = [1.0 if c == cls else 0.0 for c in range(len(BLOCK_BGR))]
                rows.append([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, 0.5 if cut else 0.9, *one_hot])
        return rows


def draw_blocks(height: int, width: int, blocks) -> np.ndarray:
    """A black uint8 BGR image with filled `blocks` (x1, y1, x2, y2, class), corners exclusive of x2, y2."""
    image = np.zeros((height, width, 3), np.uint8)
    for x1, y1, x2, y2, cls in blocks:
        image[y1:y2, x1:x2] = BLOCK_BGR[cls]
    return image


def write_block_dataset(root: Path, images: dict[str, tuple[int, int, list]]) -> Path:
    """Images {name: (height, width, blocks)} in YOLO format under `root`, both splits; returns the data yaml."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for name, (h, w, blocks) in images.items():
        cv2.imwrite(str(root / "images" / f"{name}.png"), draw_blocks(h, w, blocks))
        lines = [f"{c} {(x1 + x2) / 2 / w} {(y1 + y2) / 2 / h} {(x2 - x1) / w} {(y2 - y1) / h}\n"
                 for x1, y1, x2, y2, c in blocks]  # fmt: skip
        (root / "labels" / f"{name}.txt").write_text("".join(lines))
    path = root / "data.yaml"
    path.write_text(f"path: {root}\ntrain: images\nval: images\nnames: {NAMES}\n")
    return path

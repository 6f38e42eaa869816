"""4-image mosaic: four images placed around a random centre on a (2s, 2s) grey canvas.

Tile k's pixel (x, y) lands at (x + dx_k, y + dy_k) on the canvas, where `offsets[k] = (dx_k, dy_k)`;
only the part of each tile that falls inside its quadrant is copied.
"""

from __future__ import annotations

import numpy as np

from tphyolo.data.letterbox import PAD_VALUE
from tphyolo.errors import InputError


def mosaic4(
    images: list[np.ndarray],
    *,
    size: int,
    center: tuple[int, int],
    window: tuple[int, int, int, int] | None = None,
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Place 4 images (H_k, W_k, 3) with their corners meeting at center = (xc, yc) on a (2*size, 2*size, 3)
    canvas: top-left, top-right, bottom-left, bottom-right. Returns the canvas and per-tile offsets (dx, dy)
    in canvas pixels. With `window` = (x1, y1, x2, y2) only that part of the canvas is built and returned
    (its pixel (0, 0) is canvas pixel (x1, y1)); offsets stay in full-canvas pixels."""
    if len(images) != 4:
        raise InputError(f"mosaic4 needs 4 images, got {len(images)}")
    s2 = 2 * size
    xc, yc = center
    wx1, wy1, wx2, wy2 = window or (0, 0, s2, s2)
    canvas = np.full((wy2 - wy1, wx2 - wx1, images[0].shape[2]), PAD_VALUE, dtype=np.uint8)
    offsets = []
    for k, image in enumerate(images):
        h, w = image.shape[:2]
        if k == 0:
            xa1, ya1, xa2, ya2 = max(xc - w, 0), max(yc - h, 0), xc, yc
        elif k == 1:
            xa1, ya1, xa2, ya2 = xc, max(yc - h, 0), min(xc + w, s2), yc
        elif k == 2:
            xa1, ya1, xa2, ya2 = max(xc - w, 0), yc, xc, min(yc + h, s2)
        else:
            xa1, ya1, xa2, ya2 = xc, yc, min(xc + w, s2), min(yc + h, s2)
        # The tile is anchored at the centre corner: left tiles end at xc, top tiles end at yc.
        dx = xc - w if k in (0, 2) else xc
        dy = yc - h if k in (0, 1) else yc
        xa1, ya1, xa2, ya2 = max(xa1, wx1), max(ya1, wy1), min(xa2, wx2), min(ya2, wy2)
        if xa2 > xa1 and ya2 > ya1:
            canvas[ya1 - wy1 : ya2 - wy1, xa1 - wx1 : xa2 - wx1] = image[ya1 - dy : ya2 - dy, xa1 - dx : xa2 - dx]
        offsets.append((dx, dy))
    return canvas, offsets

"""The layout of overlapping square tiles over an image: one definition for sliced inference and sliced data.

Tiles are (x1, y1, x2, y2) integer pixel boxes, all of the same size (min(size, W) x min(size, H)), stepping by
`round(size * (1 - overlap))` (at least 1) and with the last row and column flush with the image's edges; an
image no larger than `size` is one tile, the whole image. Row by row, left to right.
"""

from __future__ import annotations

import math

DEFAULT_OVERLAP = 0.2
MIN_TILE = 32  # pixels: a tile smaller than the largest stride holds no object
# The most a tile shares with its neighbour: at 0.9 the step is a tenth of a tile (>= 3 px for the
# smallest) and a pixel lies in at most 100 tiles. Nearer 1 the step shrinks to a pixel and an image
# becomes millions of tiles (an overlap of 0.999 at 640 px made a 1 px step: the command never ended).
MAX_OVERLAP = 0.9


def tile_starts(length: int, size: int, step: int) -> list[int]:
    """The start of each tile of `size` along a side of `length`, `step` apart, the last flush with the end."""
    if length <= size:
        return [0]
    n = math.ceil((length - size) / step) + 1
    return sorted({min(i * step, length - size) for i in range(n)})


def tile_grid(height: int, width: int, *, size: int, overlap: float) -> list[tuple[int, int, int, int]]:
    """The tiles covering a height x width image (module docstring)."""
    step = max(1, round(size * (1.0 - overlap)))
    tile_w, tile_h = min(size, width), min(size, height)
    return [
        (x, y, x + tile_w, y + tile_h)
        for y in tile_starts(height, size, step)
        for x in tile_starts(width, size, step)
    ]

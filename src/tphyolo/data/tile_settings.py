"""How `tphyolo data slice` cuts a dataset into tiles (`DatasetSlicing`), apart from the cutting itself
(`tphyolo.data.tiles`): its fields are the command's flags, read without importing torch; and the rule for the
boxes a tile edge cuts (`tile_labels`), which `data slice`, training on tiles and the large synthetic scenes share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tphyolo.data.labels import ImageLabels
from tphyolo.flags import FRACTION, NON_NEGATIVE, Bounds, check_field_types, flag
from tphyolo.ops.tiling import DEFAULT_OVERLAP, MAX_OVERLAP, MIN_TILE

DEFAULT_TILE = 640
DEFAULT_MIN_VISIBLE = 0.5
DEFAULT_EMPTY_RATIO = 0.1  # one negative tile kept per ten tiles with objects


@dataclass(frozen=True)
class DatasetSlicing:
    """How a dataset is cut (see `tphyolo.data.tiles`); every field is also a flag of `tphyolo data slice`."""

    size: int = flag(DEFAULT_TILE, "--size", help="tile side, pixels", bounds=Bounds(MIN_TILE))
    overlap: float = flag(DEFAULT_OVERLAP, "--overlap", help="tile overlap fraction", bounds=Bounds(0, MAX_OVERLAP))
    min_visible: float = flag(
        DEFAULT_MIN_VISIBLE, "--min-visible", help="share of a cut box's area a tile must hold to keep it",
        bounds=FRACTION,
    )  # fmt: skip
    empty_ratio: float = flag(
        DEFAULT_EMPTY_RATIO, "--empty-ratio", help="tiles without objects kept per tile with objects",
        bounds=NON_NEGATIVE,
    )  # fmt: skip
    seed: int = flag(0, "--seed", help="random draw of the negative tiles kept", bounds=NON_NEGATIVE)

    def __post_init__(self) -> None:
        check_field_types(self)


def _clip(boxes: np.ndarray, tile: tuple[int, int, int, int]) -> np.ndarray:
    """(n, 4) xyxy clipped to `tile`, in the tile's own pixels; boxes outside get zero area."""
    x1, y1, x2, y2 = tile
    clipped = np.stack([boxes[:, 0].clip(x1, x2), boxes[:, 1].clip(y1, y2),
                        boxes[:, 2].clip(x1, x2), boxes[:, 3].clip(y1, y2)], axis=1)  # fmt: skip
    return clipped - np.array([x1, y1, x1, y1], dtype=clipped.dtype)


def _area(boxes: np.ndarray) -> np.ndarray:
    return (boxes[:, 2] - boxes[:, 0]).clip(min=0) * (boxes[:, 3] - boxes[:, 1]).clip(min=0)


def tile_labels(labels: ImageLabels, tile: tuple[int, int, int, int], *, min_visible: float) -> ImageLabels:
    """`labels` of an image as seen in `tile` (x1, y1, x2, y2), in the tile's pixels: objects whose visible
    share of area is at least `min_visible` (clipped), smaller visible parts and clipped ignore regions as
    ignore regions."""
    boxes = _clip(labels.boxes.astype(np.float64), tile)
    visible = _area(boxes)
    whole = _area(labels.boxes.astype(np.float64))
    share = np.divide(visible, whole, out=np.zeros_like(visible), where=whole > 0)
    kept = (visible > 0) & (share >= min_visible)
    cut = (visible > 0) & ~kept
    regions = _clip(labels.ignore.astype(np.float64), tile)
    ignore = np.concatenate([regions[_area(regions) > 0], boxes[cut]])
    return ImageLabels(labels.classes[kept], boxes[kept], ignore)

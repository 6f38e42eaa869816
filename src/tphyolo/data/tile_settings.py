"""How `tphyolo data slice` cuts a dataset into tiles (`DatasetSlicing`), apart from the cutting itself
(`tphyolo.data.tiles`): its fields are the command's flags, read without importing torch."""

from __future__ import annotations

from dataclasses import dataclass

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

"""Sliced inference: cut a large image into overlapping windows so that small objects keep their pixels.

Windows are the tiles of `tphyolo.ops.tiling` (as `tphyolo data slice` cuts datasets): (x1, y1, x2, y2) integer
pixel boxes of the original image, all of the same size (min(size, W) x min(size, H)), stepping by
`size * (1 - overlap)` and with the last row and column flush with the image's edges. An image no larger than
`size` is one window: the whole image.

`size="auto"` takes the network input size (`--img`, the model's training size unless changed): each window is
then seen at its own resolution, neither shrunk nor enlarged, and an image no larger than it is one window.
With `full`, the whole image is one more window; `full_min` keeps from that pass only boxes whose longer side is
at least that many pixels (the slices see the small ones better). With `skip_empty`, windows whose pixels all
have one value (blank borders, NoData) are not run.

`size="model"` leaves slicing to the model: a checkpoint trained on tiles (`tphyolo train --tile`) is sliced with
windows of its tile size, as it was validated; any other model runs whole images
(`tphyolo.infer.input_shape.settled_slicing`, which says so in one line). The commands' default.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tphyolo.errors import InputError
from tphyolo.flags import Bounds
from tphyolo.ops.tiling import DEFAULT_OVERLAP, MAX_OVERLAP, MIN_TILE, tile_grid

AUTO = "auto"  # the window size of `--slice auto`: the network input size
MODEL = "model"  # the window size a checkpoint trained on tiles was validated with, else no slicing
MIN_SLICE_SIZE = MIN_TILE
SIZE_BOUNDS = Bounds(MIN_SLICE_SIZE)
OVERLAP_BOUNDS = Bounds(0, MAX_OVERLAP)


@dataclass(frozen=True)
class SliceConfig:
    """size: window side in original pixels (>= MIN_SLICE_SIZE), AUTO (`resolved` gives the size) or MODEL (the
    model's, settled once it is loaded: `tphyolo.infer.input_shape.settled_slicing`); overlap:
    fraction of a window shared with its neighbour, in [0, MAX_OVERLAP]; full: also run the whole image as one
    more window (helps large objects); full_min: the whole-image pass keeps only boxes whose longer side is at
    least this many pixels (0: all; needs `full`); skip_empty: windows of one pixel value are not run."""

    size: int | str
    overlap: float = DEFAULT_OVERLAP
    full: bool = False
    full_min: int = 0
    skip_empty: bool = False

    def __post_init__(self) -> None:
        if self.size not in (AUTO, MODEL) and (isinstance(self.size, str) or self.size not in SIZE_BOUNDS):
            raise InputError(f"slice size must be {AUTO!r} or at least {MIN_SLICE_SIZE} pixels, got {self.size}")
        if self.overlap not in OVERLAP_BOUNDS:
            raise InputError(f"slice overlap must be {OVERLAP_BOUNDS}, got {self.overlap}")
        if self.full_min < 0:
            raise InputError(f"the full-image pass's smallest box must be >= 0 pixels, got {self.full_min}")
        if self.full_min and not self.full:
            raise InputError("a smallest box for the full-image pass needs the full-image pass")

    def resolved(self, imgsz: int) -> SliceConfig:
        """This config with an AUTO size replaced by `imgsz`, the network input size (long side)."""
        return replace(self, size=max(imgsz, MIN_SLICE_SIZE)) if self.size == AUTO else self


def slice_windows(height: int, width: int, cfg: SliceConfig) -> list[tuple[int, int, int, int]]:
    """The windows covering a height x width image, row by row; with `cfg.full` the whole image comes last
    (unless it already is the only window). Raises ValueError for an AUTO size not yet `resolved`."""
    if cfg.size in (AUTO, MODEL):
        raise InputError("an automatic slice size is resolved against the network input size first")
    windows = tile_grid(height, width, size=cfg.size, overlap=cfg.overlap)
    whole = (0, 0, width, height)
    if cfg.full and windows != [whole]:
        windows.append(whole)
    return windows

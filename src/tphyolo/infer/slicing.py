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
from tphyolo.flags import NON_NEGATIVE, Bounds, check_field_types, flag
from tphyolo.ops.tiling import DEFAULT_OVERLAP, MAX_OVERLAP, MIN_TILE, tile_grid

AUTO = "auto"  # the window size of `--slice auto`: the network input size
MODEL = "model"  # the window size a checkpoint trained on tiles was validated with, else no slicing
MIN_SLICE_SIZE = MIN_TILE
SIZE_BOUNDS = Bounds(MIN_SLICE_SIZE)
OVERLAP_BOUNDS = Bounds(0, MAX_OVERLAP)
NO_SLICING = 0  # `--slice 0`: whole images, whatever the model was trained on


def slice_size(text: str) -> int | str:
    """An argparse `type` for --slice: AUTO, MODEL, 0 (no slicing) or a window size in pixels within SIZE_BOUNDS."""
    if text in (AUTO, MODEL):
        return text
    return NO_SLICING if text == str(NO_SLICING) else SIZE_BOUNDS.parser(int)(text)


slice_size.__name__ = "size ('auto', 'model', 0 or pixels)"  # argparse: "invalid size (...) value: 'x'"


@dataclass(frozen=True)
class SliceConfig:
    """size: window side in original pixels (>= MIN_SLICE_SIZE), AUTO (`resolved` gives the size) or MODEL (the
    default: the model's, settled once it is loaded: `tphyolo.infer.input_shape.settled_slicing`); overlap:
    fraction of a window shared with its neighbour, in [0, MAX_OVERLAP]; full: also run the whole image as one
    more window (helps large objects); full_min: the whole-image pass keeps only boxes whose longer side is at
    least this many pixels (0: all; needs `full`); skip_empty: windows of one pixel value are not run. Each
    field is also a flag of the commands that run a detector (`--slice 0`, NO_SLICING, is no SliceConfig)."""

    size: int | str = flag(
        MODEL, "--slice", convert=slice_size, metavar="SIZE",
        help="sliced inference: window pixels, auto (the network input size), 0 (none) or model (a checkpoint "
        "trained with --tile slices at its tile size, other models run whole images)",
    )  # fmt: skip
    overlap: float = flag(DEFAULT_OVERLAP, "--overlap", bounds=OVERLAP_BOUNDS,
                          help=f"slice overlap fraction, {OVERLAP_BOUNDS}")  # fmt: skip
    full: bool = flag(False, "--slice-full", help="add a full-image pass to sliced inference")
    full_min: int = flag(0, "--slice-full-min", bounds=NON_NEGATIVE, metavar="PIXELS",
                         help="the full-image pass keeps only boxes whose longer side is at least this "
                         "(0: all)")  # fmt: skip
    skip_empty: bool = flag(False, "--skip-empty", help="do not run windows of one pixel value (NoData)")

    def __post_init__(self) -> None:
        check_field_types(self)  # types and bounds
        if self.size not in (AUTO, MODEL) and (isinstance(self.size, str) or self.size not in SIZE_BOUNDS):
            raise InputError(f"slice size must be {AUTO!r} or at least {MIN_SLICE_SIZE} pixels, got {self.size}")
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

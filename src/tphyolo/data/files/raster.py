"""Large rasters -- GeoTIFF, BigTIFF, Cloud-Optimized GeoTIFF, any file GDAL reads -- window by window, through
rasterio (the `geo` extra), never whole.

    with Raster.open("ortho.tif", bands=(1, 2, 3)) as raster:
        if not raster.is_nodata((x1, y1, x2, y2)):
            image = raster.read((x1, y1, x2, y2))  # uint8 BGR (h, w, 3)

The rule that turns any raster into the 8-bit RGB a detector takes:

- bands: `bands` (1-based) when given, one band (grey, repeated) or three (R, G, B); else bands 1, 2, 3 of a
  raster with three or more (a 4th band, alpha or near-infrared, is not an input), band 1 repeated of a
  one-band raster; a two-band raster must say which (`--bands`).
- values: uint8 bands are taken as they are. Any other type (uint16, int16, float) is stretched linearly per
  band from its 2nd to its 98th percentile to 0..255 (clipped), the percentiles measured on valid pixels of
  a reduced read of the whole raster (at most STATS_SIDE px long, from the overviews when the file has them).
- NoData: GDAL's masks of the bands chosen (the nodata value, else an alpha band or an internal mask); a pixel is
  NoData when it is in every band's (with a nodata value of 0, black (0, 0, 0) alone, never a pixel whose red is
  0: the same pixels read the same as a PNG of them), a window of NoData pixels alone is NoData, and NoData pixels
  of a partial window are read as 0.

The header is validated before it sizes anything: sides from 1 to MAX_RASTER_SIDE, at most `max_pixels` pixels in
all (MAX_RASTER_PIXELS unless the caller lifts it: a sparse file of a few MB can declare 10^12 pixels, months of
tiles), bands chosen that exist. A window GDAL cannot read (a file cut short, a corrupt block) raises
`RasterReadError`, naming the file, the window and GDAL's own reason.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tphyolo.errors import InputError
from tphyolo.imports import require

GEO_INSTALL = 'pip install "tphyolo[geo]"'
RASTER_SUFFIXES = (".tif", ".tiff", ".vrt")
MAX_RASTER_SIDE = 2**21  # 2 million pixels a side: a 5 cm orthomosaic 100 km long
# 10 gigapixels, e.g. 100,000 x 100,000 px: a 5 km square at 5 cm, the largest orthomosaics a drone survey makes;
# about 38,000 tiles of 640 px at overlap 0.2, hours on a CPU. A header past it is refused unless lifted.
MAX_RASTER_PIXELS = 10**10
# GDAL keeps the blocks it decoded in a cache of 5 % of the machine's memory by default: gigabytes, filled by the
# blocks of a large raster read once. Rasters are read under this bound instead (tiles are read in rows, so
# the blocks a tile shares with the next stay cached).
CACHE_BYTES = 256 * 1024**2
STATS_SIDE = 1024  # the reduced read that measures the stretch of non-8-bit bands
STRETCH_PERCENTILES = (2.0, 98.0)

Window = tuple[int, int, int, int]  # x1, y1, x2, y2 in raster pixels


class RasterReadError(InputError):
    """A window of an open raster that GDAL could not read; the message names the file, window and reason."""


def rasterio_module():
    """rasterio, or MissingExtraError naming the `geo` extra."""
    return require("rasterio", purpose="reading rasters (GeoTIFF)", install=GEO_INSTALL)


def choose_bands(count: int, bands: tuple[int, ...] | None, *, path: Path | str) -> tuple[int, int, int]:
    """The three 1-based bands read as R, G, B (module docstring); ValueError naming `path` and `--bands`."""
    if bands is None:
        if count >= 3:
            return (1, 2, 3)
        if count == 1:
            return (1, 1, 1)
        raise InputError(f"{path}: {count} bands; choose one or three of them with --bands")
    if len(bands) not in (1, 3):
        raise InputError(f"--bands {' '.join(map(str, bands))}: give one band (grey) or three (R G B)")
    missing = [b for b in bands if not 1 <= b <= count]
    if missing:
        raise InputError(f"--bands {missing[0]}: {path} has bands 1..{count}")
    return (bands[0],) * 3 if len(bands) == 1 else (bands[0], bands[1], bands[2])


@dataclass(frozen=True)
class Stretch:
    """Per band chosen: the values mapped to 0 and to 255 (None for uint8 bands, taken as they are)."""

    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None

    def to_uint8(self, data: np.ndarray) -> np.ndarray:
        """(3, h, w) band values -> (3, h, w) uint8."""
        if self.low is None:
            return data.astype(np.uint8, copy=False)
        low = np.asarray(self.low, dtype=np.float32)[:, None, None]
        span = np.maximum(np.asarray(self.high, dtype=np.float32)[:, None, None] - low, 1e-6)
        return ((data.astype(np.float32) - low) / span * 255.0).clip(0, 255).round().astype(np.uint8)


class Raster:
    """An open raster read window by window as uint8 BGR; `width`, `height`, `crs` (None without one),
    `transform` (affine pixel -> map coefficients a, b, c, d, e, f: x = a*col + b*row + c, y = d*col + e*row + f),
    `bands` (the three read as R, G, B), `stretch`. Use `Raster.open` as a context manager: while it is open,
    GDAL's block cache is bounded to CACHE_BYTES."""

    def __init__(self, dataset, bands: tuple[int, int, int], stretch: Stretch, env) -> None:
        self._dataset, self._env = dataset, env
        self.width, self.height = int(dataset.width), int(dataset.height)
        self.crs = dataset.crs.to_string() if dataset.crs else None
        t = dataset.transform
        self.transform = (t.a, t.b, t.c, t.d, t.e, t.f)
        self.bands, self.stretch = bands, stretch
        self.path = Path(dataset.name)
        from rasterio.errors import NodataShadowWarning

        self._shadow_warning = NodataShadowWarning

    @classmethod
    def open(
        cls, path: str | Path, *, bands: tuple[int, ...] | None = None, max_pixels: int = MAX_RASTER_PIXELS
    ) -> Raster:
        """Open `path` and check its header. Raises ValueError naming the file when it is not a raster GDAL
        reads, its sides are outside 1..MAX_RASTER_SIDE, it has more than `max_pixels` pixels or the bands
        chosen do not exist."""
        rasterio = rasterio_module()
        env = rasterio.Env(GDAL_CACHEMAX=CACHE_BYTES)
        env.__enter__()
        try:
            with warnings.catch_warnings():  # no CRS: the caller says so once, in its own words
                warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
                dataset = rasterio.open(path)
        except rasterio.errors.RasterioIOError as error:
            env.__exit__(None, None, None)
            raise InputError(f"{path}: not a raster GDAL reads ({str(error).splitlines()[0]})") from error
        try:
            if not (1 <= dataset.width <= MAX_RASTER_SIDE and 1 <= dataset.height <= MAX_RASTER_SIDE):
                size = f"{dataset.width}x{dataset.height}"
                raise InputError(f"{path}: {size} pixels, outside 1..{MAX_RASTER_SIDE} a side")
            if dataset.width * dataset.height > max_pixels:
                raise InputError(f"{path}: {dataset.width}x{dataset.height} pixels ({_gigapixels(dataset)}) is above "
                                 f"the raster limit of {max_pixels:,} pixels; --max-pixels lifts it")  # fmt: skip
            chosen = choose_bands(dataset.count, None if bands is None else tuple(bands), path=path)
            try:
                stretch = _measure_stretch(dataset, chosen)
            except rasterio.errors.RasterioIOError as error:  # the reduced read of a file cut short
                reason = str(error.__cause__ or error).splitlines()[0]
                raise RasterReadError(f"{path}: could not be read to measure its value range ({reason})") from None
        except BaseException:
            dataset.close()
            env.__exit__(None, None, None)
            raise
        return cls(dataset, chosen, stretch, env)

    def __enter__(self) -> Raster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._dataset.close()
        self._env.__exit__(None, None, None)

    def _window(self, window: Window):
        from rasterio.windows import Window as RioWindow

        x1, y1, x2, y2 = window
        return RioWindow(x1, y1, x2 - x1, y2 - y1)

    def _mask(self, window: Window) -> np.ndarray:
        """(h, w) uint8 mask of the bands chosen: 0 where every band's GDAL mask says NoData, else 255 valid."""
        with warnings.catch_warnings():  # a nodata value beside an alpha band: the nodata value rules, as said
            warnings.simplefilter("ignore", self._shadow_warning)
            masks = self._dataset.read_masks(sorted(set(self.bands)), window=self._window(window))  # (k, h, w)
        return np.bitwise_or.reduce(masks, axis=0)

    def is_nodata(self, window: Window) -> bool:
        """Whether every pixel of `window` is NoData (module docstring); RasterReadError when unreadable."""
        with self._named_read_errors(window):
            return not self._mask(window).any()

    def read(self, window: Window) -> np.ndarray:
        """`window` as uint8 BGR (h, w, 3), NoData pixels 0; RasterReadError when GDAL cannot read it."""
        rio_window = self._window(window)
        unique = sorted(set(self.bands))
        with self._named_read_errors(window):
            data = self._dataset.read(unique, window=rio_window)  # (k, h, w)
            mask = self._mask(window)
        data = data[[unique.index(b) for b in self.bands]]  # (3, h, w) R, G, B
        image = self.stretch.to_uint8(data)
        image[:, mask == 0] = 0
        return np.ascontiguousarray(image[::-1].transpose(1, 2, 0))  # (h, w, 3) BGR

    @contextlib.contextmanager
    def _named_read_errors(self, window: Window) -> Iterator[None]:
        """GDAL's read errors ("Read failed. See previous exception for details.") as a RasterReadError that
        names the file, the window and the reason GDAL gave before (its chained exception)."""
        from rasterio.errors import RasterioIOError

        try:
            yield
        except RasterioIOError as error:
            reason = str(error.__cause__ or error.__context__ or error).splitlines()[0]
            x1, y1, x2, y2 = window
            raise RasterReadError(f"{self.path}: pixels x {x1}-{x2}, y {y1}-{y2} could not be read "
                                  f"({reason})") from None  # fmt: skip


def _gigapixels(dataset) -> str:
    pixels = dataset.width * dataset.height
    return f"{pixels / 1e9:,.1f} gigapixels" if pixels >= 10**9 else f"{pixels / 1e6:,.2f} megapixels"


def _measure_stretch(dataset, bands: tuple[int, int, int]) -> Stretch:
    """The Stretch of the module docstring, measured on a read of at most STATS_SIDE px a side."""
    if all(dataset.dtypes[b - 1] == "uint8" for b in bands):
        return Stretch()
    scale = max(dataset.width, dataset.height) / STATS_SIDE
    shape = (max(1, round(dataset.height / max(scale, 1))), max(1, round(dataset.width / max(scale, 1))))
    low, high = [], []
    for band in bands:
        values = dataset.read(band, out_shape=shape, masked=True)  # overviews when the file has them
        valid = values.compressed().astype(np.float64)
        lo, hi = np.percentile(valid, STRETCH_PERCENTILES) if valid.size else (0.0, 1.0)
        low.append(float(lo))
        high.append(float(hi))
    return Stretch(tuple(low), tuple(high))

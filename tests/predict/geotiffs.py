"""GeoTIFFs written by rasterio for the raster tests: coloured blocks on a noisy ground, a NoData border, a CRS
in metres. Not a test module."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import rasterio
import rasterio.windows

ORIGIN = (500000.0, 4500000.0)  # UTM zone 33N (EPSG:32633), metres
PIXEL = 0.5  # metres
RED, GREEN = (250, 5, 5), (5, 250, 5)  # RGB of classes 0 and 1 (never 0: 0 is NoData)
TRANSFORM = rasterio.Affine(PIXEL, 0.0, ORIGIN[0], 0.0, -PIXEL, ORIGIN[1])  # north up


def scene(height: int, width: int, blocks, *, border: int = 0, seed: int = 0) -> np.ndarray:
    """(3, height, width) uint8 RGB: a grey ground 10..40, `blocks` (x1, y1, x2, y2, class) filled, NoData (0)
    in the first `border` columns."""
    rng = np.random.default_rng(seed)
    data = np.repeat(rng.integers(10, 41, (1, height, width), dtype=np.uint8), 3, axis=0)
    for x1, y1, x2, y2, cls in blocks:
        data[:, y1:y2, x1:x2] = np.asarray(RED if cls == 0 else GREEN, dtype=np.uint8)[:, None, None]
    data[:, :, :border] = 0
    return data


def write_geotiff(path: Path, data: np.ndarray, *, crs: str | None = "EPSG:32633", nodata: float | None = 0,
                  overviews: bool = False, **profile) -> Path:  # fmt: skip
    """`data` (bands, h, w) as a tiled, deflate-compressed GeoTIFF; with `overviews`, built at 2, 4, 8."""
    count, height, width = data.shape
    with warnings.catch_warnings():  # a raster without a CRS is what some tests want
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        return _write(path, data, crs=crs, nodata=nodata, overviews=overviews, **profile)


def _write(path: Path, data: np.ndarray, *, crs, nodata, overviews: bool, **profile) -> Path:
    count, height, width = data.shape
    with rasterio.open(path, "w", driver="GTiff", width=width, height=height, count=count, dtype=data.dtype,
                       crs=crs, transform=TRANSFORM if crs else None, nodata=nodata, tiled=True, blockxsize=256,
                       blockysize=256, compress="deflate", **profile) as dst:  # fmt: skip
        dst.write(data)
        if overviews:
            dst.build_overviews([2, 4, 8], rasterio.enums.Resampling.average)
    return path


def map_corners(x1: float, y1: float, x2: float, y2: float) -> list[list[float]]:
    """The closed ring of a pixel box in map metres, worked out from ORIGIN and PIXEL (north up)."""
    def at(col: float, row: float) -> list[float]:
        return [ORIGIN[0] + PIXEL * col, ORIGIN[1] - PIXEL * row]

    return [at(x1, y1), at(x2, y1), at(x2, y2), at(x1, y2), at(x1, y1)]


def write_sparse_geotiff(path: Path, *, side: int, content: tuple[int, int, int], blocks) -> Path:
    """A `side` x `side` RGB GeoTIFF that is NoData except a square of `content` (x, y, size) holding grey ground
    and `blocks` (in raster pixels): sparse (blocks never written take no space), so a 40,000 px raster costs
    a few megabytes and a second to write."""
    x, y, size = content
    local = [(x1 - x, y1 - y, x2 - x, y2 - y, c) for x1, y1, x2, y2, c in blocks]
    with rasterio.open(path, "w", driver="GTiff", width=side, height=side, count=3, dtype="uint8",
                       crs="EPSG:32633", transform=TRANSFORM, nodata=0, tiled=True, blockxsize=512, blockysize=512,
                       compress="deflate", sparse_ok=True, bigtiff="yes") as dst:  # fmt: skip
        dst.write(scene(size, size, local), window=rasterio.windows.Window(x, y, size, size))
    return path


def random_checkpoint(folder: Path) -> Path:
    """A yolov5n of random weights (seed 0) for classes car and bus, saved in `folder`: a model that finds boxes
    all over at a low threshold, many of them on the seams of tiles."""
    import torch
    from tests.helpers import save_model_checkpoint

    from tphyolo.models import build_model

    torch.manual_seed(0)
    return save_model_checkpoint(folder / "tiny.pt", build_model("yolov5n", num_classes=2), ["car", "bus"])

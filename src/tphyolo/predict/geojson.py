"""Detections as GeoJSON: one feature per box, its polygon in the raster's coordinate reference system.

    collection = geojson_collection(detections, names=names, transform=raster.transform, crs=raster.crs)
    write_geojson("ortho.geojson", collection)

A box (x1, y1, x2, y2) in raster pixels becomes the closed ring of its four corners (top-left, top-right,
bottom-right, bottom-left, top-left) mapped through the raster's affine transform (a, b, c, d, e, f):
x = a * col + b * row + c, y = d * col + e * row + f -- a polygon, so a rotated raster keeps exact corners.
Properties: `class` (name), `class_id`, `score`, and the pixel box `bbox_px`. The collection names its CRS in a
`crs` member (as GDAL and QGIS read it); with `to_crs` the corners are reprojected first (rasterio's
`warp.transform`; "EPSG:4326" gives longitude, latitude). A raster without a CRS keeps pixel coordinates
(identity transform, y downwards) and no `crs` member.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.raster import rasterio_module
from tphyolo.errors import InputError
from tphyolo.ops.detections import Detections

PIXELS = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)  # the identity transform: coordinates in pixels
COORDINATE_DIGITS = 9  # enough for a millimetre in degrees and far below a pixel in metres


def box_rings(boxes: np.ndarray, transform: Sequence[float]) -> np.ndarray:
    """(n, 4) xyxy pixel boxes -> (n, 5, 2) closed rings of map coordinates through `transform`."""
    a, b, c, d, e, f = transform
    x1, y1, x2, y2 = (np.asarray(boxes, dtype=np.float64).reshape(-1, 4)[:, k] for k in range(4))
    cols = np.stack([x1, x2, x2, x1, x1], axis=1)  # (n, 5)
    rows = np.stack([y1, y1, y2, y2, y1], axis=1)
    return np.stack([a * cols + b * rows + c, d * cols + e * rows + f], axis=2)


def checked_crs(text: str) -> str:
    """`text` as GDAL names the coordinate reference system it gives ("epsg:4326" -> "EPSG:4326"); ValueError
    saying why for one that PROJ does not know or that is not a CRS at all."""
    rasterio = rasterio_module()  # or one line naming the geo extra
    from rasterio.crs import CRS

    with rasterio.Env():  # GDAL's errors come back as exceptions, not as lines on stderr
        try:
            return CRS.from_user_input(text).to_string()
        except (rasterio.errors.CRSError, ValueError) as error:
            reason = str(error).splitlines()[0] if str(error) else "not a CRS"
            raise InputError(f"not a coordinate reference system PROJ knows ({reason}; e.g. EPSG:4326)") from None


def _reproject(rings: np.ndarray, src_crs: str, dst_crs: str) -> np.ndarray:
    rasterio_module()  # or one line naming the geo extra
    from rasterio import warp

    xs, ys = warp.transform(src_crs, dst_crs, rings[..., 0].ravel().tolist(), rings[..., 1].ravel().tolist())
    return np.stack([np.asarray(xs), np.asarray(ys)], axis=1).reshape(rings.shape)


def geojson_collection(
    detections: Detections,
    *,
    names: Sequence[str],
    transform: Sequence[float] | None = PIXELS,
    crs: str | None = None,
    to_crs: str | None = None,
) -> dict:
    """A GeoJSON FeatureCollection of `detections` (raster pixels) mapped through `transform` into `crs`, or
    reprojected to `to_crs` (module docstring); `transform` None means PIXELS. Raises ValueError for `to_crs`
    without a source `crs`."""
    rings = box_rings(detections.boxes.numpy(), transform or PIXELS)
    if to_crs is not None:
        if crs is None:
            raise InputError(f"--to-crs {to_crs}: the raster has no CRS to reproject from")
        rings, crs = _reproject(rings, crs, to_crs), to_crs
    rings = rings.round(COORDINATE_DIGITS)
    features = [
        {
            "type": "Feature",
            "geometry": {"type": "Polygon", "coordinates": [ring.tolist()]},
            "properties": {"class": names[label], "class_id": label, "score": round(score, 5),
                           "bbox_px": [round(v, 2) for v in box]},  # fmt: skip
        }
        for ring, box, score, label in zip(rings, detections.boxes.tolist(), detections.scores.tolist(),
                                           detections.labels.tolist(), strict=True)  # fmt: skip
    ]
    collection: dict = {"type": "FeatureCollection", "features": features}
    if crs is not None:
        collection["crs"] = {"type": "name", "properties": {"name": _crs_name(crs)}}
    return collection


def _crs_name(crs: str) -> str:
    """"EPSG:32633" -> the OGC URN GDAL writes ("urn:ogc:def:crs:EPSG::32633"); other strings as they are."""
    if crs.upper().startswith("EPSG:"):
        return f"urn:ogc:def:crs:EPSG::{crs.split(':', 1)[1]}"
    return crs


def write_geojson(path: str | Path, collection: dict) -> Path:
    """Write `collection` to `path` (parents created) in one step (`data.files.atomic`); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(collection))

"""Detection over a raster too large to decode (an orthomosaic): tile by tile, NoData tiles skipped, batched,
merged across tile seams -- memory bounded by a batch of tiles and the detections, whatever the raster's size.

    run = predict_raster(predictor, "ortho.tif", slicing=SliceConfig(640, 0.2), bands=(1, 2, 3))
    run.detections  # Detections in raster pixels; run.crs, run.transform to map them (`predict.geojson`)

The tiles are those sliced inference runs on an image (`tphyolo.ops.tiling`), read one at a time
(`tphyolo.data.files.raster.Raster`), row by row; each batch of `config.batch` tiles is one call of the
Predictor. Every tile's detections, moved to raster pixels, are then merged as the windows of a sliced image
are (`config.merge`, `--match`, ...), so an object cut by a seam comes out once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tphyolo.data.files.raster import Raster, Window
from tphyolo.infer.merge import merge_detections
from tphyolo.infer.slicing import SliceConfig
from tphyolo.ops.detections import Detections
from tphyolo.ops.tiling import tile_grid
from tphyolo.predict.predictor import Predictor

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class RasterPrediction:
    """The detections of one raster in its pixels, with what maps them (`crs`, None without one; `transform`
    a, b, c, d, e, f) and what the run did: tiles in all, tiles skipped as NoData, seconds spent reading tiles
    and in inference (the Predictor calls), and the merge."""

    path: Path
    width: int
    height: int
    detections: Detections
    crs: str | None
    transform: tuple[float, ...]
    tiles: int
    skipped: int
    read_seconds: float
    infer_seconds: float
    merge_seconds: float


def raster_slicing(slicing: SliceConfig, *, imgsz: int) -> SliceConfig:
    """`slicing` with an AUTO size resolved to `imgsz`; ValueError for a full-image pass (never read whole)."""
    if slicing.full:
        raise ValueError("--slice-full: a raster is run tile by tile, never whole")
    return slicing.resolved(imgsz)


def raster_tiles(raster: Raster, slicing: SliceConfig) -> list[Window]:
    """The tiles of `raster` at the slicing's size and overlap, row by row."""
    return tile_grid(raster.height, raster.width, size=slicing.size, overlap=slicing.overlap)


def predict_raster(
    predictor: Predictor,
    path: str | Path,
    *,
    slicing: SliceConfig,
    bands: Sequence[int] | None = None,
    skip_nodata: bool = True,
    on_tile: Callable[[], None] | None = None,
) -> RasterPrediction:
    """Detect objects over the raster at `path` (module docstring). slicing: the tiles' size and overlap (an
    AUTO size is the predictor's input size; the full-image pass is refused: a raster is never read whole);
    bands: the bands read (`tphyolo.data.files.raster`); skip_nodata: tiles that are all NoData are not run;
    on_tile: called after each tile (a progress bar). Raises ValueError for an unreadable raster."""
    slicing = raster_slicing(slicing, imgsz=predictor.config.imgsz)
    found: list[torch.Tensor] = []
    read_s = infer_s = 0.0
    skipped = 0
    with Raster.open(path, bands=None if bands is None else tuple(bands)) as raster:
        if raster.crs is None:
            LOGGER.warning("%s has no CRS: its detections stay in pixel coordinates", path)
        tiles = raster_tiles(raster, slicing)
        batch: list[tuple[Window, np.ndarray]] = []

        def run_batch() -> None:
            nonlocal infer_s
            start = time.perf_counter()
            results = predictor.predict_images([image for _, image in batch])
            for ((x1, y1, _, _), _), result in zip(batch, results, strict=True):
                rows = result.rows()
                rows[:, :4] += torch.tensor([x1, y1, x1, y1], dtype=rows.dtype)
                found.append(rows)
            infer_s += time.perf_counter() - start
            batch.clear()

        for tile in tiles:
            start = time.perf_counter()
            empty = skip_nodata and raster.is_nodata(tile)
            if not empty:
                batch.append((tile, raster.read(tile)))
            read_s += time.perf_counter() - start
            skipped += empty
            if len(batch) == predictor.config.batch:
                run_batch()
            if on_tile is not None:
                on_tile()
        if batch:
            run_batch()
        start = time.perf_counter()
        detections = _merged(found, predictor, width=raster.width, height=raster.height)
        merge_s = time.perf_counter() - start
        return RasterPrediction(Path(path), raster.width, raster.height, detections, raster.crs, raster.transform,
                                len(tiles), skipped, read_s, infer_s, merge_s)  # fmt: skip


def _merged(found: list[torch.Tensor], predictor: Predictor, *, width: int, height: int) -> Detections:
    """Every tile's detections (raster pixels) merged as the windows of one sliced image."""
    rows = torch.cat(found) if found else torch.zeros((0, 6))
    if len(rows) == 0:
        return Detections.from_rows(rows)
    cfg = predictor.config
    merged = merge_detections([rows], method=cfg.merge, width=width, height=height, iou=cfg.merge_threshold,
                              max_det=len(rows), agnostic=cfg.merge_across_classes, match=cfg.match)  # fmt: skip
    return Detections.from_rows(merged)


@dataclass(frozen=True)
class RasterOutputs:
    """What to write of a raster's detections into a run folder: `STEM.geojson` (map coordinates, reprojected
    to `to_crs` when given), `labels/STEM.txt` (YOLO lines normalised by the raster's size, with scores when
    `save_conf`), `predictions.json` (COCO results in raster pixels)."""

    save_geojson: bool = True
    to_crs: str | None = None
    save_txt: bool = False
    save_conf: bool = False
    save_json: bool = False


def predict_raster_into(
    save_dir: Path,
    predictor: Predictor,
    path: str | Path,
    *,
    slicing: SliceConfig,
    outputs: RasterOutputs,
    bands: Sequence[int] | None = None,
    progress: bool = False,
) -> RasterPrediction:
    """`predict_raster` of `path` with its `outputs` written into `save_dir`; `progress`: a bar over the tiles
    with its rate and time left. Returns the prediction."""
    from tqdm import tqdm

    from tphyolo.predict.geojson import geojson_collection, write_geojson
    from tphyolo.predict.writers import coco_predictions, yolo_lines

    path = Path(path)
    tiling = raster_slicing(slicing, imgsz=predictor.config.imgsz)
    with Raster.open(path, bands=None if bands is None else tuple(bands)) as raster:  # fails before the run
        total = len(raster_tiles(raster, tiling))
    with tqdm(total=total, desc=path.name, unit="tile", disable=not progress) as bar:
        run = predict_raster(predictor, path, slicing=slicing, bands=bands, on_tile=bar.update)
    names, stem = predictor.names, path.stem
    if outputs.save_geojson:
        collection = geojson_collection(run.detections, names=names, transform=run.transform if run.crs else None,
                                        crs=run.crs, to_crs=outputs.to_crs)  # fmt: skip
        write_geojson(save_dir / f"{stem}.geojson", collection)
    if outputs.save_txt:
        lines = yolo_lines(run.detections, width=run.width, height=run.height, with_score=outputs.save_conf)
        (save_dir / "labels").mkdir(parents=True, exist_ok=True)
        (save_dir / "labels" / f"{stem}.txt").write_text("".join(line + "\n" for line in lines))
    if outputs.save_json:
        records = coco_predictions([(stem, run.detections)])
        (save_dir / "predictions.json").write_text(json.dumps(records))
    return run

"""Detection over a raster too large to decode (an orthomosaic): tile by tile, NoData tiles skipped, batched,
merged across tile seams -- memory bounded by a batch of tiles and the detections, whatever the raster's size.

    run = predict_raster(predictor, "ortho.tif", slicing=SliceConfig(640, 0.2), read=RasterRead(bands=(1, 2, 3)))
    run.detections  # Detections in raster pixels; run.crs, run.transform to map them (`predict.geojson`)

The tiles are those sliced inference runs on an image (`tphyolo.ops.tiling`), read one at a time
(`tphyolo.data.files.raster.Raster`, opened as `RasterRead` says: the bands, the pixel limit), row by row. A row
of tiles is the unit of work: its tiles go to the Predictor `config.batch` at a time (a batch never spans two
rows), and its detections, moved to raster pixels, are kept unmerged. Once every row is done, all of them are
merged as the windows of a sliced image are (`config.merge`, `--match`, ...), so an object cut by a seam --
between two tiles of a row or two rows -- comes out once. A tile GDAL cannot read (a file cut short, a corrupt
block) is skipped and counted (`RasterPrediction.unreadable`); the first one is named through `on_note` with
GDAL's reason, and the rest of the raster goes on.

The rows are the units of the runner of every sharded run (`predict.runner.units`). Given a run folder, each
finished row is journaled (`predict.runner.journal`): one line (`RowRecord`) holding the row's unmerged detections
(float32, exactly) and its NoData and unreadable tiles, appended whole or not at all (a line cut short fails its
check and the row is done again). So a run that stops anywhere loses at most the rows it had not journaled, and
a resumed run (`resume=True`) runs only the others: its batches, detections and merge are those of an
uninterrupted run, and so are its outputs, exactly. Under torchrun (`dist`) the rows left are dealt as
`runtime.sharding` states; rank 0 gathers every rank's rows, merges them in row order and alone gets the
RasterPrediction (the others get None): the same result as one process.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.raster import MAX_RASTER_PIXELS, Raster, RasterReadError, Window
from tphyolo.errors import InputError
from tphyolo.infer.merge import merge_detections
from tphyolo.infer.slicing import AUTO, MODEL, SliceConfig
from tphyolo.ops.detections import Detections
from tphyolo.ops.tiling import tile_grid
from tphyolo.predict.geojson import geojson_collection, write_geojson
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.runner.journal import checked_count, checked_rows, journal_object
from tphyolo.predict.runner.units import ONE_PROCESS, RunJournal, UnitRunner
from tphyolo.predict.writers import coco_predictions, yolo_lines
from tphyolo.runtime.distributed import DistContext

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class RasterPrediction:
    """The detections of one raster in its pixels, with what maps them (`crs`, None without one; `transform`
    a, b, c, d, e, f) and what the run did: tiles in all, tiles skipped as NoData, seconds spent reading tiles
    and in inference (the Predictor calls, summed over ranks), and the merge; rows of tiles in all and rows a
    resumed run found finished before."""

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
    rows: int = 0
    rows_before: int = 0
    unreadable: int = 0


@dataclass(frozen=True)
class RasterRead:
    """How a raster is opened (`Raster.open`): `bands` read (1-based; None: the rule of
    `tphyolo.data.files.raster`) and `max_pixels`, the largest raster run (its header is refused above it)."""

    bands: tuple[int, ...] | None = None
    max_pixels: int = MAX_RASTER_PIXELS

    def open(self, path: str | Path) -> Raster:
        return Raster.open(path, bands=self.bands, max_pixels=self.max_pixels)


def raster_slicing(slicing: SliceConfig, *, imgsz: int) -> SliceConfig:
    """`slicing` with an AUTO size (or one left to the model: a raster is always tiled) resolved to `imgsz`;
    ValueError for a full-image pass (never read whole)."""
    if slicing.full:
        raise InputError("--slice-full: a raster is run tile by tile, never whole")
    return (replace(slicing, size=AUTO) if slicing.size == MODEL else slicing).resolved(imgsz)


def raster_tiles(raster: Raster, slicing: SliceConfig) -> list[Window]:
    """The tiles of `raster` at the slicing's size and overlap, row by row."""
    return tile_grid(raster.height, raster.width, size=slicing.size, overlap=slicing.overlap)


def tile_rows(tiles: Sequence[Window]) -> list[list[Window]]:
    """`tiles` (row by row) cut into rows: the tiles of each y, left to right."""
    rows: dict[int, list[Window]] = {}
    for tile in tiles:
        rows.setdefault(tile[1], []).append(tile)
    return list(rows.values())


def row_unit(path: str | Path, row: Sequence[Window]) -> str:
    """The journal's name of a row of tiles: the raster's file name, the row's pixel rows and its tiles."""
    x1, y1, x2, y2 = row[0]
    return f"{Path(path).name}: rows {y1}-{y2}, {len(row)} tiles of {x2 - x1} px"


@dataclass(frozen=True)
class RowRecord:
    """A finished row of tiles, as its journal line holds it: the row's name (`row_unit`), its unmerged
    detections (N, 6) float32 in raster pixels (tile order), and its tiles skipped as NoData and unreadable."""

    row: str
    rows: torch.Tensor
    nodata: int
    unreadable: int

    @property
    def unit(self) -> str:
        return self.row

    def to_json(self) -> str:
        return json.dumps({"row": self.row, "rows": self.rows.tolist(), "nodata": self.nodata,
                           "unreadable": self.unreadable})  # fmt: skip

    @classmethod
    def from_json(cls, line: str, *, classes: int | None = None) -> RowRecord:
        """The row of a journal line; ValueError saying what is wrong (as `UnitRecord.from_json`)."""
        data = journal_object(line, keys=("row", "rows", "nodata", "unreadable"))
        if not isinstance(data["row"], str):
            raise InputError("'row' is not the name of a row of tiles")
        rows = checked_rows(data["rows"], classes, where=data["row"][:120])
        return cls(data["row"], rows, checked_count(data, "nodata"), checked_count(data, "unreadable"))


class _Tally:
    """Seconds this process spent reading tiles and in the Predictor; whether it named an unreadable tile."""

    def __init__(self, on_note: Callable[[str], None] | None) -> None:
        self.read = self.infer = 0.0
        self.on_note, self.unreadable_named = on_note, False

    def unreadable(self, error: RasterReadError) -> None:
        if not self.unreadable_named and self.on_note is not None:
            self.on_note(f"{error}; unreadable tiles are skipped and counted")
        self.unreadable_named = True


def predict_raster(
    predictor: Predictor,
    path: str | Path,
    *,
    slicing: SliceConfig,
    read: RasterRead = RasterRead(),
    skip_nodata: bool = True,
    on_tile: Callable[[int], None] | None = None,
    run_dir: Path | None = None,
    resume: bool = False,
    dist: DistContext = ONE_PROCESS,
    on_note: Callable[[str], None] | None = None,
) -> RasterPrediction | None:
    """Detect objects over the raster at `path` (module docstring). slicing: the tiles' size and overlap (an
    AUTO size is the predictor's input size; the full-image pass is refused: a raster is never read whole);
    read: the bands read and the pixel limit (`RasterRead`); skip_nodata: tiles that are all NoData are not run;
    on_tile: called after each tile with the tiles done so far over all ranks (a progress bar); run_dir: the
    folder whose journal records each finished row (a new run clears it); resume: run only the rows it does not
    record (each line checked; a bad one goes to `on_note` and its row is done again); dist: this process's
    place under torchrun (every rank calls this with the same arguments). Returns None on ranks other than 0.
    Raises ValueError naming the file for a raster that cannot be opened or is above `read.max_pixels`; an
    unreadable tile is skipped (module docstring)."""
    if resume and run_dir is None:
        raise InputError("resume=True needs the run_dir whose journal it continues")
    slicing = raster_slicing(slicing, imgsz=predictor.config.imgsz)
    timer = _Tally(on_note)
    with read.open(path) as raster:
        if raster.crs is None and dist.is_main:
            LOGGER.warning("%s has no CRS: its detections stay in pixel coordinates", path)
        rows = tile_rows(raster_tiles(raster, slicing))
        names = [row_unit(path, row) for row in rows]
        read_row = partial(RowRecord.from_json, classes=len(predictor.names))
        journal = None if run_dir is None else RunJournal(run_dir, read=read_row, resume=resume, on_bad=on_note)
        runner = UnitRunner(names, dist=dist, journal=journal)
        if on_tile is not None and dist.is_main and runner.before:
            on_tile(runner.count(sum(len(rows[k]) for k in runner.before)))
        tick = None if on_tile is None else (lambda: on_tile(runner.count(1)))
        for k in runner.mine:
            runner.finish(k, _predict_row(predictor, raster, rows[k], name=names[k], skip_nodata=skip_nodata,
                                          timer=timer, on_tile=tick))  # fmt: skip
        gathered = runner.gather(summary=(timer.read, timer.infer))
        if gathered is None:
            return None
        records, seconds = gathered
        nodata, unreadable = sum(r.nodata for r in records), sum(r.unreadable for r in records)
        start = time.perf_counter()
        detections = _merged([r.rows for r in records], predictor, width=raster.width, height=raster.height)
        merge_s = time.perf_counter() - start
        return RasterPrediction(
            Path(path), raster.width, raster.height, detections, raster.crs, raster.transform,
            tiles=sum(len(row) for row in rows), skipped=nodata,
            read_seconds=sum(s[0] for s in seconds), infer_seconds=sum(s[1] for s in seconds),
            merge_seconds=merge_s, rows=len(rows), rows_before=len(runner.before), unreadable=unreadable,
        )  # fmt: skip


def _predict_row(
    predictor: Predictor,
    raster: Raster,
    row: Sequence[Window],
    *,
    name: str,
    skip_nodata: bool,
    timer: _Tally,
    on_tile: Callable[[], None] | None,
) -> RowRecord:
    """The record of one row of tiles named `name`: its unmerged detections in raster pixels (tile order), its
    NoData tiles and its unreadable ones counted."""
    found: list[torch.Tensor] = []
    batch: list[tuple[Window, np.ndarray]] = []
    skipped = unreadable = 0

    def run_batch() -> None:
        start = time.perf_counter()
        results = predictor.predict_images([image for _, image in batch])
        for ((x1, y1, _, _), _), result in zip(batch, results, strict=True):
            rows = result.rows()
            rows[:, :4] += torch.tensor([x1, y1, x1, y1], dtype=rows.dtype)
            found.append(rows)
        timer.infer += time.perf_counter() - start
        batch.clear()

    for tile in row:
        start = time.perf_counter()
        empty = False
        try:
            empty = skip_nodata and raster.is_nodata(tile)
            if not empty:
                batch.append((tile, raster.read(tile)))
        except RasterReadError as error:
            timer.unreadable(error)
            unreadable += 1
        timer.read += time.perf_counter() - start
        skipped += empty
        if len(batch) == predictor.config.batch:
            run_batch()
        if on_tile is not None:
            on_tile()
    if batch:
        run_batch()
    rows = torch.cat(found) if found else torch.zeros((0, 6))
    return RowRecord(name, rows, skipped, unreadable)


def _merged(found: list[torch.Tensor], predictor: Predictor, *, width: int, height: int) -> Detections:
    """Every tile's detections (raster pixels) merged as the windows of one sliced image: each tile kept at most
    `max_det`, and the merge keeps them all (`Detector.combine`)."""
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
    `save_conf`), `predictions.json` (COCO results in raster pixels). Each is written in one step
    (`data.files.atomic`): whole or not at all."""

    save_geojson: bool = True
    to_crs: str | None = None
    save_txt: bool = False
    save_conf: bool = False
    save_json: bool = False


@dataclass(frozen=True)
class RasterCallbacks:
    """What `predict_raster_into` tells its caller as it goes. on_open(raster, tiles): called with the open
    raster and its number of tiles before any tile is run (to record, check or announce it); on_note(text): as
    `predict_raster`'s."""

    on_open: Callable[[Raster, int], None] | None = None
    on_note: Callable[[str], None] | None = None


def predict_raster_into(
    save_dir: Path,
    predictor: Predictor,
    path: str | Path,
    *,
    slicing: SliceConfig,
    outputs: RasterOutputs,
    read: RasterRead = RasterRead(),
    progress: bool = False,
    resume: bool = False,
    dist: DistContext = ONE_PROCESS,
    calls: RasterCallbacks = RasterCallbacks(),
) -> RasterPrediction | None:
    """`predict_raster` of `path` journaled into `save_dir` (resumed with `resume`, shared by the ranks of
    `dist`), with its `outputs` written there by rank 0; `progress`: a bar over the tiles (all ranks') with its
    rate and time left, on rank 0. calls: see RasterCallbacks. Returns the prediction (None on ranks other
    than 0)."""
    on_open, on_note = calls.on_open, calls.on_note
    path = Path(path)
    tiling = raster_slicing(slicing, imgsz=predictor.config.imgsz)
    with read.open(path) as raster:  # fails before the run
        total = len(raster_tiles(raster, tiling))
        if on_open is not None:
            on_open(raster, total)
    with tqdm(total=total, desc=path.name, unit="tile", disable=not (progress and dist.is_main)) as bar:
        run = predict_raster(predictor, path, slicing=slicing, read=read, run_dir=save_dir, resume=resume,
                             dist=dist, on_note=on_note, on_tile=lambda done: bar.update(done - bar.n))  # fmt: skip
    if run is None:
        return None
    names, stem = predictor.names, path.stem
    if outputs.save_geojson:
        collection = geojson_collection(run.detections, names=names, transform=run.transform if run.crs else None,
                                        crs=run.crs, to_crs=outputs.to_crs)  # fmt: skip
        write_geojson(save_dir / f"{stem}.geojson", collection)
    if outputs.save_txt:
        lines = yolo_lines(run.detections, width=run.width, height=run.height, with_score=outputs.save_conf)
        (save_dir / "labels").mkdir(parents=True, exist_ok=True)
        write_text_atomic(save_dir / "labels" / f"{stem}.txt", "".join(line + "\n" for line in lines))
    if outputs.save_json:
        write_text_atomic(save_dir / "predictions.json", json.dumps(coco_predictions([(stem, run.detections)])))
    return run

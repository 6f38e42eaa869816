"""One prediction run, as `tphyolo predict` makes it: a `PredictJob` run into a run folder, over files and
streams (`predict.folder`) or over a raster too large to decode, tile by tile (`predict.raster`).

    run = run_predict(PredictJob(DetectorSpec(("best.pt",)), PredictInputs(source="ortho.tif")))
    run.save_dir, run.raster.detections  # or run.folder.detections, for images and videos

Under torchrun every rank calls it with the same job: the ranks join one process group, rank 0 makes the run
folder and tells the others its name, and they share the units of work out (`predict.runner.units`). The run
folder keeps the job (`SETTINGS_FILE`: `tphyolo.runtime.run_dir.job_data`, paths made absolute) with what a
resume checks besides: the weights' SHA-256 and the sources (`predict.runner.resume`), and a raster's size. A job
with `inputs.resume` continues the run in that folder: it must ask for the results the saved job asks for
(`check_same_job`: only the runtime, device, batch size and run folder may differ), the weights and sources are
checked against the record (a source gone is named through `events.note` and the rest goes on), and the finished
units are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tphyolo.data.files.image_limits import MAX_IMAGE_PIXELS
from tphyolo.data.files.raster import RASTER_SUFFIXES, Raster
from tphyolo.errors import InputError
from tphyolo.infer.build import spec_device, spec_runtime
from tphyolo.infer.slicing import AUTO, SliceConfig
from tphyolo.predict.folder import PredictionRun, RunCallbacks, predict_to_folder, source_image_ids
from tphyolo.predict.geojson import checked_crs
from tphyolo.predict.job import DEFAULT_PROJECT, SETTINGS_FILE, PredictJob
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.raster import RasterCallbacks, RasterOutputs, RasterPrediction, RasterRead, predict_raster_into
from tphyolo.predict.runner.journal import JOURNAL_DIR
from tphyolo.predict.runner.resume import (
    check_raster_resumed,
    check_resumed,
    check_same_job,
    raster_fingerprint,
    run_fingerprint,
)
from tphyolo.predict.sources import resolve_source
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.console import NO_EVENTS, RunEvents
from tphyolo.runtime.decisions import FILE as DECISIONS_FILE
from tphyolo.runtime.distributed import DistContext, broadcast_object, process_group
from tphyolo.runtime.run_dir import JOB_KEY, job_data, removed_if_left_empty, write_job_file
from tphyolo.yaml_files import load_yaml_file

# What a run folder holds before any result: a run that fails with no more leaves no folder. UNREAD: the same
# with the journal, for a run whose every file was skipped (its journal holds nothing done).
BOOKKEEPING = (SETTINGS_FILE, DECISIONS_FILE)
UNREAD = (*BOOKKEEPING, JOURNAL_DIR)


@dataclass(frozen=True)
class PredictRun:
    """What a run did: its `save_dir` and, for files and streams, the `folder` run (each rank its own counts),
    or, for a raster source, the `raster` prediction (rank 0's; None on the other ranks); `is_main`: whether
    this process speaks for the run (rank 0, or the one process)."""

    save_dir: Path
    folder: PredictionRun | None = None
    raster: RasterPrediction | None = None
    is_main: bool = True


def run_predict(
    job: PredictJob,
    *,
    runtime: RuntimeConfig | None = None,
    events: RunEvents = NO_EVENTS,
) -> PredictRun:
    """Run `job` (module docstring) on `runtime` (default: the detector spec's, else `RuntimeConfig()`) and the
    spec's device (default: the runtime's, under torchrun this process's `LOCAL_RANK`-th). `events`
    (`RunEvents`): `skip(file, error)` for a file that does not decode (skipped; on the rank that
    met it), `note(text)` for each warning (a frame's, a bad journal line's, a source of a resumed run that is
    gone, the first unreadable tile of a raster; on rank 0 where the whole run's), `raster_opened(path, width,
    height, tiles)` once a raster source is open (on rank 0), `progress`: a bar on rank 0. Raises ValueError
    naming the bad setting or file (before the run folder is made when it can); a resume whose job asks for
    other results than the saved run's is refused naming each setting (`check_same_job`)."""
    inputs, weights = job.inputs, job.detector.models
    if inputs.source is None:
        raise InputError("a prediction needs a source (inputs.source)")
    raster = raster_source(job)  # a raster runs tile by tile; its tiles are the slices
    record = job_data(job)  # what SETTINGS_FILE keeps
    files = resolve_source(inputs.source)
    resume, saved = None if inputs.resume is None else Path(inputs.resume), None
    if resume is not None:
        saved = _saved_settings(resume / SETTINGS_FILE)
        check_same_job(saved, job, where=str(resume / SETTINGS_FILE))
        for gone in check_resumed(saved, weights, files, where=str(resume / SETTINGS_FILE)):
            events.tell(f"{gone} of the run is gone; the rest goes on")
    image_ids = source_image_ids(job.outputs.coco_gt, files) if job.outputs.coco_gt is not None else None
    dist = DistContext.from_env()  # under torchrun: the ranks share the work, rank 0 names the folder
    if job.outputs.tool_flags and (raster is not None or resume is not None or dist.distributed):
        why = "a raster" if raster is not None else "--resume" if resume is not None else "torchrun"
        raise InputError(f"{' and '.join(job.outputs.tool_flags)} write(s) one file of a whole run of images in one "
                         f"process: not with {why}")  # fmt: skip
    spec = replace(job.detector, runtime=runtime or spec_runtime(job.detector))
    device = spec_device(spec, dist.local_rank)
    with process_group(dist, device):  # a raster is cut into tiles, and the Predictor slices no further
        spec = replace(spec, device=str(device), slicing=None if raster else spec.slicing)
        predictor = Predictor.from_spec(spec)
        save_dir = resume
        if save_dir is None:
            save_dir = job.output.create(DEFAULT_PROJECT) if dist.is_main else None
            save_dir = Path(broadcast_object(dist, None if save_dir is None else str(save_dir)))
        with removed_if_left_empty(save_dir if dist.is_main and resume is None else None, ignoring=BOOKKEEPING):
            if raster is not None:
                folder = _RunFolder(job, predictor, save_dir, dist, saved)
                prediction = _predict_raster(folder, raster, events)
                return PredictRun(save_dir, raster=prediction, is_main=dist.is_main)
            settings = None
            if saved is None:  # what a resume reads: the job, the weights' and sources' fingerprints
                settings = {JOB_KEY: record, **run_fingerprint(weights, files)}
            calls = RunCallbacks(on_skip=events.skip, on_note=events.note)
            folder = predict_to_folder(predictor, files, save_dir, job.outputs, dist=dist, style=job.style,
                                       image_ids=image_ids, settings=settings, resume=saved is not None,
                                       vid_stride=inputs.vid_stride, calls=calls, progress=events.progress,
                                       model="+".join(Path(str(w)).name for w in weights))  # fmt: skip
    return PredictRun(save_dir, folder=folder, is_main=dist.is_main)


def raster_source(job: PredictJob) -> Path | None:
    """The raster `job.inputs.source` names when it runs tile by tile, else None: a .tif/.tiff/.vrt file given
    with a raster setting (`RasterSettings.asked`), or, with rasterio installed, one that has a CRS or is larger
    than an image may be decoded whole (MAX_IMAGE_PIXELS). Raises ValueError for raster settings without one,
    and for settings a raster cannot take."""
    settings, asked = job.raster, job.raster.asked()
    path = Path(str(job.inputs.source))
    if not (path.suffix.lower() in RASTER_SUFFIXES and path.is_file()):
        if asked:
            raise InputError(f"{' and '.join(asked)} need(s) a raster --source (.tif, .tiff, .vrt)")
        return None
    if settings.to_crs is not None and not settings.save_geojson:
        raise InputError("--to-crs reprojects --save-geojson; add --save-geojson or drop it")
    if settings.to_crs is not None:
        try:
            checked_crs(settings.to_crs)
        except ValueError as error:
            raise InputError(f"--to-crs {settings.to_crs}: {error}") from None
    if not asked:
        try:
            import rasterio  # lazy: an optional extra, needed only for a raster given without raster settings
        except ImportError:
            return None
        with rasterio.open(path) as dataset:
            if dataset.crs is None and dataset.width * dataset.height <= MAX_IMAGE_PIXELS:
                return None
    if job.detector.slicing is not None and job.detector.slicing.full:
        raise InputError("--slice-full: a raster is run tile by tile, never whole")
    return path


@dataclass(frozen=True)
class _RunFolder:
    """A run's job, its Predictor and folder, and the resumed run's record (None for a new run)."""

    job: PredictJob
    predictor: Predictor
    save_dir: Path
    dist: DistContext
    saved: dict[str, Any] | None


def _predict_raster(run: _RunFolder, path: Path, events: RunEvents):
    """Predict the raster `path` into the run folder with the job's outputs (rank 0's RasterPrediction, None on
    the other ranks). A new run records its settings with the weights' SHA-256 and the raster's size once the
    raster opened; a resumed one is checked against them."""
    job, settings_file = run.job, run.save_dir / SETTINGS_FILE
    settings, out = job.raster, job.outputs

    def record_or_check(raster: Raster, tiles: int) -> None:
        if settings.to_crs is not None and raster.crs is None:
            raise InputError(f"--to-crs {settings.to_crs}: {path} has no CRS to reproject from")
        if run.dist.is_main and events.raster_opened is not None:
            events.raster_opened(path, raster.width, raster.height, tiles)
        fingerprint = raster_fingerprint(path, width=raster.width, height=raster.height)
        if run.saved is not None:
            check_raster_resumed(run.saved, path, fingerprint, where=str(settings_file))
        elif run.dist.is_main:
            write_job_file(settings_file, job, **run_fingerprint(job.detector.models, [path]), raster=fingerprint)

    outputs = RasterOutputs(save_geojson=settings.save_geojson or not (out.save_txt or out.save_json),
                            to_crs=settings.to_crs, save_txt=out.save_txt, save_conf=out.save_conf,
                            save_json=out.save_json)  # fmt: skip
    read = RasterRead(bands=settings.bands, max_pixels=settings.max_pixels)
    calls = RasterCallbacks(on_open=record_or_check, on_note=events.note)
    return predict_raster_into(run.save_dir, run.predictor, path, slicing=job.detector.slicing or SliceConfig(AUTO),
                               outputs=outputs, read=read, progress=events.progress, resume=run.saved is not None,
                               dist=run.dist, calls=calls)  # fmt: skip


def _saved_settings(path: Path) -> dict[str, Any]:
    """The settings a run folder keeps (a mapping); InputError naming `path` when it is missing or not one."""
    if not path.is_file():
        raise InputError(f"{path}: no such file; inputs.resume must name a prediction run folder")
    saved = load_yaml_file(path)
    if not isinstance(saved, dict):
        raise InputError(f"{path}: expected a mapping of the run's settings, got {type(saved).__name__}")
    return saved

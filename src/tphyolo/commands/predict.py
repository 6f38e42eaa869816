"""`tphyolo predict`: detect objects in images, folders, globs, .txt lists, videos and streams (a webcam index,
an rtsp/rtmp/http(s) video URL), and rasters too large to decode (GeoTIFF orthomosaics, tile by tile, with
GeoJSON out); write the results into a run folder. The run is `tphyolo.predict.run.run_predict` of a
`PredictJob`; this module parses its flags and prints what it did.

Under torchrun the ranks share the work and write into one run folder. A run folder keeps the job (args.yaml:
`tphyolo.runtime.run_dir.job_data`, paths made absolute) and a journal of what is finished, so that `--resume
RUN_DIR` continues an interrupted run with the same settings, in one process or several, from any folder. A run
folder of an older version (args.yaml holding flags) is read through these flags and converted once.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from tphyolo.commands.options.argv import read_saved_run
from tphyolo.commands.options.detector import DetectorFlags, add_detector_flags, detector_spec, on_process_device
from tphyolo.errors import InputError, UsageError, describe_error
from tphyolo.flags import add_flags, from_flags, setting_name
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import SliceConfig
from tphyolo.predict.draw_style import DrawStyle
from tphyolo.predict.job import SETTINGS_FILE, PredictInputs, PredictJob, RasterSettings
from tphyolo.predict.outputs import OutputSettings
from tphyolo.runtime.console import RunEvents
from tphyolo.runtime.run_dir import JOB_KEY, OutputDir, job_from_data, remove_if_empty, write_job_file
from tphyolo.yaml_files import load_yaml_file

USES_RUNTIME = True
RUNTIME_INFERENCE = True
FLAG_CLASSES = (PredictInputs, DetectorFlags, InferenceConfig, SliceConfig, OutputDir, RasterSettings, OutputSettings,
                DrawStyle)  # every flag of the command, by the settings class that declares it  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, PredictInputs)
    add_detector_flags(parser)
    add_flags(parser, OutputDir)
    add_flags(parser, RasterSettings)
    add_flags(parser, OutputSettings)
    add_flags(parser, DrawStyle)


def command_parser() -> argparse.ArgumentParser:
    """A parser of this command's own flags (not the runtime's): what a run folder's settings are read with."""
    parser = argparse.ArgumentParser(prog="tphyolo predict", add_help=False)
    add_arguments(parser)
    return parser


def resumed_job(args: argparse.Namespace) -> PredictJob:
    """The job of `--resume RUN_DIR`: the one saved in RUN_DIR/SETTINGS_FILE, continued in RUN_DIR. Raises
    UsageError when other flags are given too, or RUN_DIR is not a prediction run folder, and InputError naming
    the file and the setting for settings that do not read. A folder of an older version (flags saved) is read
    through its flags and its file converted."""
    given = _given_flags(args)
    if given:
        raise UsageError(f"--resume continues a run with its saved settings; drop {' '.join(given)}")
    path = args.resume / SETTINGS_FILE
    if not path.is_file():
        raise UsageError(f"--resume {args.resume}: not a prediction run folder (no {SETTINGS_FILE})")
    saved = load_yaml_file(path)
    if isinstance(saved, dict) and JOB_KEY in saved:
        job = job_from_data(PredictJob, saved[JOB_KEY], where=str(path))
    else:
        job = _older_job(args.resume)
    return replace(job, inputs=replace(job.inputs, resume=args.resume))


def _given_flags(args: argparse.Namespace) -> list[str]:
    """The command's flags (not the runtime's, not --resume) given other values than their defaults."""
    parser = command_parser()
    names = {field.name: setting_name(cls, field.name) for cls in FLAG_CLASSES for field in dataclasses.fields(cls)}
    return [names[dest] for dest, value in vars(args).items()
            if dest in names and dest != "resume" and value != parser.get_default(dest)]  # fmt: skip


def _older_job(run_dir: Path) -> PredictJob:
    """The job of a run folder an older version wrote (its settings file holds the command's flags as 'argv'),
    its file rewritten with the job in their place (the fingerprint kept)."""
    path = run_dir / SETTINGS_FILE
    parsed, saved = read_saved_run(add_arguments, run_dir, SETTINGS_FILE, prog="tphyolo predict",
                                   kind="prediction run")  # fmt: skip
    missing = [flag for flag in ("--source", "--weights") if vars(parsed)[flag[2:]] is None]
    if missing:
        raise InputError(f"{path}: 'argv' has no {' and no '.join(missing)}; not the settings of a prediction "
                         "run")  # fmt: skip
    job = predict_job(parsed)
    write_job_file(path, job, **{key: value for key, value in saved.items() if key != "argv"})
    return job


def predict_job(args: argparse.Namespace) -> PredictJob:
    """The run the flags ask for. Raises UsageError for flags given where they have no effect (slice flags
    without `--slice`, `--save-conf` without `--save-txt`, ...)."""
    outputs = from_flags(OutputSettings, args)
    problems = outputs.problems()
    if not args.save_img and (args.hide_labels or args.hide_conf or args.line_width is not None):
        problems.append("--hide-labels, --hide-conf and --line-width style the annotated images; drop --no-save-img")
    if problems:
        raise UsageError(problems[0])
    return PredictJob(
        detector_spec(args), from_flags(PredictInputs, args), from_flags(RasterSettings, args), outputs,
        from_flags(DrawStyle, args), from_flags(OutputDir, args),
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from tphyolo.predict.run import UNREAD, run_predict  # lazy: it imports torch; 'predict -h'

    if args.resume is not None:
        job = resumed_job(args)
    elif args.source is None or args.weights is None:
        raise UsageError("--source and --weights are required (unless --resume RUN_DIR)")
    else:
        job = predict_job(args)
    job = replace(job, detector=on_process_device(job.detector, args.runtime))
    events = RunEvents(note=_warned, skip=_skipped, raster_opened=_announced, progress=True)
    result = run_predict(job, runtime=args.runtime, events=events)
    if not result.is_main:
        return 0
    if result.folder is None:
        return _raster_summary(result.raster, result.save_dir)
    run = result.folder
    if run.skipped and not run.files and not run.finished_before:
        print(f"tphyolo predict: error: --source {job.inputs.source}: no file or stream could be read "
              f"({run.skipped} skipped, named above)", file=sys.stderr)  # fmt: skip
        if job.inputs.resume is None and not job.output.exist_ok:  # a folder of settings alone: gone, its name free
            remove_if_empty(result.save_dir, ignoring=UNREAD)
        return 1
    warnings = f" ({run.warned} with a warning)" if run.warned else ""
    before = f" ({run.finished_before} finished before)" if run.finished_before else ""
    print(f"{run.detections} detections in {run.files} file(s){warnings}{before}, {run.skipped} "
          f"skipped; results in {result.save_dir}")  # fmt: skip
    return 0


def _raster_summary(run, save_dir: Path) -> int:
    """Print what the raster run `run` did; the exit code (1 when no tile could be read)."""
    crs = run.crs or "pixels (the raster has no CRS)"
    before = f", {run.rows_before} of {run.rows} rows finished before" if run.rows_before else ""
    unreadable = f", {run.unreadable} unreadable skipped" if run.unreadable else ""
    print(f"{len(run.detections)} detections in {run.path.name} ({run.width}x{run.height}, {crs}): {run.tiles} "
          f"tiles, {run.skipped} NoData skipped{unreadable}{before}; results in {save_dir}")  # fmt: skip
    if run.unreadable == run.tiles:
        print(f"tphyolo predict: error: {run.path}: no tile could be read (named above)", file=sys.stderr)
        return 1
    return 0


def _skipped(path, error: Exception) -> None:
    tqdm.write(f"tphyolo predict: skipped {describe_error(error)}", file=sys.stderr)


def _warned(text: str) -> None:  # a partial JPEG, the first of several frames, a source gone, a bad tile
    tqdm.write(f"tphyolo predict: warning: {text}", file=sys.stderr)


def _announced(path: Path, width: int, height: int, tiles: int) -> None:
    print(f"{path.name}: {width}x{height} px, {tiles:,} tiles to run")

"""`tphyolo predict`: detect objects in images, folders, globs, .txt lists, videos and streams (a webcam index,
an rtsp/rtmp/http(s) video URL), and rasters too large to decode (GeoTIFF orthomosaics, tile by tile, with
GeoJSON out); write the results into a run folder. The run is `tphyolo.predict.run.run_predict` of a
`PredictJob`; this module parses its flags and prints what it did.

Under torchrun the ranks share the work and write into one run folder. A run folder keeps the command's settings
(args.yaml: its flags, paths made absolute) and a journal of what is finished, so that `--resume RUN_DIR`
continues an interrupted run with the same settings, in one process or several.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

from tphyolo.commands.options.argv import flags_for, read_saved_run, saved_flags
from tphyolo.commands.options.detector import add_detector_flags, detector_spec, inference_device
from tphyolo.errors import InputError, UsageError, describe_error
from tphyolo.flags import add_flags, from_flags
from tphyolo.predict.draw_style import DrawStyle
from tphyolo.predict.job import SETTINGS_FILE, PredictInputs, PredictJob, RasterSettings
from tphyolo.predict.outputs import OutputSettings
from tphyolo.runtime.run_dir import OutputDir, remove_if_empty

USES_RUNTIME = True
RUNTIME_INFERENCE = True
PATH_FLAGS = ("source", "weights", "coco_gt", "classifier")  # made absolute in a run folder's settings


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


def resumed_args(args: argparse.Namespace, settings_file: str) -> argparse.Namespace:
    """`args` of `--resume RUN_DIR`: the settings saved in RUN_DIR/`settings_file`, with this run's runtime
    flags. Raises UsageError when other flags are given too, or RUN_DIR is not a prediction run folder."""
    given = [flag for flag in flags_for(command_parser(), args) if not flag.startswith("--resume")]
    if given:
        raise UsageError(f"--resume continues a run with its saved settings; drop {' '.join(given)}")
    parsed, _ = read_saved_run(add_arguments, args.resume, settings_file, prog="tphyolo predict",
                               kind="prediction run")  # fmt: skip
    values = vars(parsed)
    missing = [flag for flag in ("--source", "--weights") if values[flag[2:]] is None]
    if missing:
        raise InputError(f"{args.resume / settings_file}: 'argv' has no {' and no '.join(missing)}; not the "
                         "settings of a prediction run")  # fmt: skip
    return argparse.Namespace(**(values | {"resume": args.resume, "runtime": args.runtime}))


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
    from tphyolo.predict.run import UNREAD, PredictCallbacks, run_predict  # lazy: it imports torch; 'predict -h'

    if args.resume is not None:
        args = resumed_args(args, SETTINGS_FILE)
    elif args.source is None or args.weights is None:
        raise UsageError("--source and --weights are required (unless --resume RUN_DIR)")
    job = predict_job(args)
    argv = None if args.resume is not None else _saved_argv(args)
    callbacks = PredictCallbacks(on_skip=_skipped, on_note=_warned, on_raster=_announced)
    result = run_predict(job, runtime=args.runtime, device=inference_device(args.runtime), callbacks=callbacks,
                         argv=argv)  # fmt: skip
    if not result.is_main:
        return 0
    if result.folder is None:
        return _raster_summary(result.raster, result.save_dir)
    run = result.folder
    if run.skipped and not run.files and not run.finished_before:
        print(f"tphyolo predict: error: --source {args.source}: no file or stream could be read "
              f"({run.skipped} skipped, named above)", file=sys.stderr)  # fmt: skip
        if args.resume is None and not job.output.exist_ok:  # a folder of settings alone: gone, its name free
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


def _saved_argv(args: argparse.Namespace) -> list[str]:
    """The flags that give `args`' settings again from any folder, without the output folder's and --resume."""
    return saved_flags(command_parser(), args, paths=PATH_FLAGS, leave_out=("project", "name", "exist_ok", "resume"))


def _skipped(path, error: Exception) -> None:
    tqdm.write(f"tphyolo predict: skipped {describe_error(error)}", file=sys.stderr)


def _warned(text: str) -> None:  # a partial JPEG, the first of several frames, a source gone, a bad tile
    tqdm.write(f"tphyolo predict: warning: {text}", file=sys.stderr)


def _announced(path: Path, width: int, height: int, tiles: int) -> None:
    print(f"{path.name}: {width}x{height} px, {tiles:,} tiles to run")

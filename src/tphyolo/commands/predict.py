"""`tphyolo predict`: detect objects in images, folders, globs, .txt lists, videos and streams (a webcam index,
an rtsp/rtmp/http(s) video URL), and rasters too large to decode (GeoTIFF orthomosaics, tile by tile, with
GeoJSON out: `tphyolo.commands.options.raster`); write the results (`tphyolo.predict.run.predict_to_folder`).

Under torchrun the ranks share the files out and write into one run folder (`tphyolo.predict.run`). A run folder
keeps the command's settings (args.yaml: its flags, paths made absolute) and a journal of what is finished, so
that `--resume RUN_DIR` continues an interrupted run with the same settings, in one process or several.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

from tphyolo.commands.options.argv import flags_for, read_saved_run, saved_flags
from tphyolo.commands.options.inference import (
    add_classifier_flags,
    add_inference_flags,
    add_slice_flags,
    classifier_settings,
    inference_device,
    inference_settings,
    slice_settings,
)
from tphyolo.commands.options.prediction import PredictFlags
from tphyolo.commands.options.raster import add_raster_flags, raster_source, run_raster
from tphyolo.errors import InputError, UsageError, describe_error
from tphyolo.flags import add_flags, from_flags
from tphyolo.predict.draw_style import DrawStyle
from tphyolo.predict.outputs import OutputSettings
from tphyolo.predict.resume import check_resumed, run_fingerprint
from tphyolo.predict.sources import resolve_source
from tphyolo.runtime.run_dir import OutputDir, removed_if_left_empty

USES_RUNTIME = True
RUNTIME_INFERENCE = True
PATH_FLAGS = ("source", "weights", "coco_gt", "classifier")  # made absolute in a run folder's settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, PredictFlags)
    add_inference_flags(parser)
    add_classifier_flags(parser)
    add_slice_flags(parser)
    add_raster_flags(parser)
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
    parsed, saved = read_saved_run(add_arguments, args.resume, settings_file, prog="tphyolo predict",
                                   kind="prediction run")  # fmt: skip
    values = vars(parsed)
    missing = [flag for flag in ("--source", "--weights") if values[flag[2:]] is None]
    if missing:
        raise InputError(f"{args.resume / settings_file}: 'argv' has no {' and no '.join(missing)}; not the "
                         "settings of a prediction run")  # fmt: skip
    return argparse.Namespace(**(values | {"resume": args.resume, "runtime": args.runtime, "saved_run": saved}))


def slice_config(args: argparse.Namespace):
    """The SliceConfig of `--slice`, `--overlap`, `--slice-full` (None without `--slice`). Raises UsageError for
    flags given where they have no effect (slice flags without `--slice`, `--save-conf` without `--save-txt`)."""
    problems = from_flags(OutputSettings, args).problems()
    if not args.save_img and (args.hide_labels or args.hide_conf or args.line_width is not None):
        problems.append("--hide-labels, --hide-conf and --line-width style the annotated images; drop --no-save-img")
    if problems:
        raise UsageError(problems[0])
    return slice_settings(args)


def run(args: argparse.Namespace) -> int:
    # lazy: these import torch; 'tphyolo predict -h' must not
    from tphyolo.predict.predictor import Predictor
    from tphyolo.predict.run import SETTINGS_FILE, RunCallbacks, predict_to_folder, source_image_ids
    from tphyolo.runtime.distributed import DistContext, broadcast_object, process_group

    if args.resume is not None:
        args = resumed_args(args, SETTINGS_FILE)
    elif args.source is None or args.weights is None:
        raise UsageError("--source and --weights are required (unless --resume RUN_DIR)")
    device = inference_device(args.runtime)
    slicing, raster = slice_config(args), raster_source(args)  # a raster runs tile by tile; its tiles are the slices
    outputs = from_flags(OutputSettings, args)
    files = resolve_source(args.source)
    if args.resume is not None:
        for gone in check_resumed(args.saved_run, args.weights, files, where=str(args.resume / SETTINGS_FILE)):
            print(f"tphyolo predict: warning: {gone} of the run is gone; the rest goes on", file=sys.stderr)
    image_ids = source_image_ids(outputs.coco_gt, files) if outputs.coco_gt is not None else None
    dist = DistContext.from_env()  # under torchrun: the ranks share the files, rank 0 names the folder
    with process_group(dist, device):
        predictor = Predictor(args.weights, inference_settings(args), runtime=args.runtime, device=device,
                              slice=None if raster else slicing, model_weights=args.model_weights,
                              **classifier_settings(args))  # fmt: skip
        save_dir = args.resume
        if save_dir is None:
            save_dir = from_flags(OutputDir, args).create("runs/predict") if dist.is_main else None
            save_dir = Path(broadcast_object(dist, None if save_dir is None else str(save_dir)))
        with removed_if_left_empty(save_dir if dist.is_main and args.resume is None else None):
            if raster is not None:
                argv = None if args.resume is not None else _saved_argv(args)
                return run_raster(save_dir, predictor, raster, args, slicing, dist=dist, settings=argv,
                                  settings_file=save_dir / SETTINGS_FILE)  # fmt: skip
            settings = None
            if args.resume is None:  # what a resume reads: the flags, the weights' and sources' fingerprints
                settings = {"argv": _saved_argv(args), **run_fingerprint(args.weights, files)}
            style = from_flags(DrawStyle, args)
            result = predict_to_folder(predictor, files, save_dir, outputs, dist=dist, style=style,
                                       image_ids=image_ids, settings=settings, resume=args.resume is not None,
                                       vid_stride=args.vid_stride,
                                       calls=RunCallbacks(on_skip=_skipped, on_note=_warned))  # fmt: skip
    if dist.is_main and result.skipped and not result.files and not result.finished_before:
        print(f"tphyolo predict: error: --source {args.source}: no file or stream could be read "
              f"({result.skipped} skipped, named above)", file=sys.stderr)  # fmt: skip
        return 1
    if dist.is_main:
        warnings = f" ({result.warned} with a warning)" if result.warned else ""
        before = f" ({result.finished_before} finished before)" if result.finished_before else ""
        print(f"{result.detections} detections in {result.files} file(s){warnings}{before}, {result.skipped} "
              f"skipped; results in {save_dir}")  # fmt: skip
    return 0


def _saved_argv(args: argparse.Namespace) -> list[str]:
    """The flags that give `args`' settings again from any folder, without the output folder's and --resume."""
    return saved_flags(command_parser(), args, paths=PATH_FLAGS, leave_out=("project", "name", "exist_ok", "resume"))


def _skipped(path, error: Exception) -> None:
    tqdm.write(f"tphyolo predict: skipped {describe_error(error)}", file=sys.stderr)


def _warned(text: str) -> None:  # a partial JPEG, the first of several frames
    tqdm.write(f"tphyolo predict: warning: {text}", file=sys.stderr)

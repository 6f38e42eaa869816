"""`tphyolo predict`: detect objects in images, folders, globs, .txt lists, videos and streams (a webcam index,
an rtsp/rtmp/http(s) video URL), and rasters too large to decode (GeoTIFF orthomosaics, tile by tile, with
GeoJSON out: `tphyolo.commands.options.raster`); write the results.

Under torchrun the ranks share the files out and write into one run folder (`tphyolo.predict.run`). A run folder
keeps the command's settings (args.yaml: its flags, paths made absolute) and a journal of what is finished, so
that `--resume RUN_DIR` continues an interrupted run with the same settings, in one process or several.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from tphyolo.commands.options.inference import (
    add_classifier_flags,
    add_inference_flags,
    add_slice_flags,
    classifier_settings,
    inference_device,
    slice_settings,
)
from tphyolo.commands.options.raster import add_raster_flags, raster_source, run_raster
from tphyolo.errors import describe_error
from tphyolo.flags import add_flags, bounded

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tphyolo.predict.draw_style import DrawStyle

    parser.add_argument(
        "--source",
        help="image, folder, glob, .txt list of files, video, webcam index (0) or rtsp/rtmp/http(s) video URL "
        "(required unless --resume)",
    )
    parser.add_argument(
        "--weights",
        nargs="+",
        help="checkpoint(s) or exported model(s) (.onnx, OpenVINO, .torchscript); several form an ensemble "
        "(required unless --resume)",
    )
    parser.add_argument(
        "--model-weights", nargs="+", type=bounded(float, 0), default=None, help="WBF weight of each model"
    )
    add_inference_flags(parser)
    add_classifier_flags(parser)
    add_slice_flags(parser)
    add_raster_flags(parser)
    parser.add_argument("--no-save-img", "--nosave", action="store_true", help="do not write annotated images/videos")
    parser.add_argument("--save-txt", action="store_true", help="YOLO txt per image (labels/)")
    parser.add_argument("--save-conf", action="store_true", help="scores in --save-txt files")
    parser.add_argument("--save-visdrone", action="store_true", help="VisDrone submission txt per image (visdrone/)")
    parser.add_argument("--save-json", action="store_true", help="COCO results json (predictions.json)")
    parser.add_argument(
        "--coco-gt",
        type=Path,
        metavar="PATH",
        help="COCO dataset json whose image ids --save-json uses (matched by file name without suffix)",
    )
    parser.add_argument("--save-crop", action="store_true", help="each detection's image region (crops/CLASS/)")
    add_flags(parser, DrawStyle)
    parser.add_argument(
        "--vid-stride",
        type=bounded(int, 1),
        default=1,
        metavar="N",
        help="read every N-th frame of videos and streams (default: 1)",
    )
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue an interrupted run in RUN_DIR with its settings: finished outputs are kept, the rest done",
    )


SETTINGS_FILE = "args.yaml"  # a run folder's settings, which --resume reads
PATH_FLAGS = ("source", "weights", "coco_gt", "classifier")  # made absolute in SETTINGS_FILE


def command_parser() -> argparse.ArgumentParser:
    """A parser of this command's own flags (not the runtime's): what SETTINGS_FILE is read with."""
    parser = argparse.ArgumentParser(prog="tphyolo predict", add_help=False)
    add_arguments(parser)
    return parser


def saved_settings(args: argparse.Namespace) -> list[str]:
    """The flags that give `args`' settings again from any folder (paths that exist made absolute), without
    the output folder's and --resume."""
    import os

    from tphyolo.commands.train import flags_for

    def absolute(value):
        if isinstance(value, list):
            return [absolute(v) for v in value]
        text = str(value)
        return os.path.abspath(text) if value is not None and (Path(text).exists() or "*" in text) else value

    values = {name: absolute(value) if name in PATH_FLAGS else value for name, value in vars(args).items()}
    for name in ("project", "name", "exist_ok", "resume"):
        values.pop(name, None)
    return flags_for(command_parser(), argparse.Namespace(**values))


class _SavedArgvParser(argparse.ArgumentParser):
    """A parser of a run folder's saved argv: a bad value raises ValueError, for the caller to name the file."""

    def error(self, message: str):  # noqa: ANN201 - argparse's hook, which must not return
        raise ValueError(message)


def resumed_args(args: argparse.Namespace) -> argparse.Namespace:
    """`args` of `--resume RUN_DIR`: the settings saved in the run folder, with this run's runtime flags.
    Raises UsageError when other flags are given too, or RUN_DIR is not a prediction run folder."""
    from tphyolo.commands.train import flags_for
    from tphyolo.errors import UsageError
    from tphyolo.yaml_files import load_yaml_file

    given = [flag for flag in flags_for(command_parser(), args) if not flag.startswith("--resume")]
    if given:
        raise UsageError(f"--resume continues a run with its saved settings; drop {' '.join(given)}")
    path = args.resume / SETTINGS_FILE
    if not path.is_file():
        raise UsageError(f"--resume {args.resume}: not a prediction run folder (no {SETTINGS_FILE})")
    saved = load_yaml_file(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("argv"), list):
        raise ValueError(f"{path}: expected a mapping with an 'argv' list")
    parser = _SavedArgvParser(prog="tphyolo predict", add_help=False)
    add_arguments(parser)
    try:
        values = vars(parser.parse_args([str(word) for word in saved["argv"]]))
    except ValueError as error:
        raise ValueError(f"{path}: 'argv' (the run's saved settings): {error}") from None
    missing = [flag for flag in ("--source", "--weights") if values[flag[2:]] is None]
    if missing:
        raise ValueError(f"{path}: 'argv' has no {' and no '.join(missing)}; not the settings of a prediction run")
    return argparse.Namespace(**(values | {"resume": args.resume, "runtime": args.runtime, "saved_run": saved}))


def slice_config(args: argparse.Namespace):
    """The SliceConfig of `--slice`, `--overlap`, `--slice-full`, or None without `--slice`. Raises UsageError
    for slice flags given without `--slice` and for `--save-conf` without `--save-txt` (flags with no effect)."""
    from tphyolo.errors import UsageError

    if args.save_conf and not args.save_txt:
        raise UsageError("--save-conf adds scores to the --save-txt files; add --save-txt or drop it")
    if args.coco_gt is not None and not args.save_json:
        raise UsageError("--coco-gt numbers the images of --save-json; add --save-json or drop it")
    if args.no_save_img and (args.hide_labels or args.hide_conf or args.line_width is not None):
        raise UsageError("--hide-labels, --hide-conf and --line-width style the annotated images; drop --no-save-img")
    return slice_settings(args)


def run(args: argparse.Namespace) -> int:
    from tphyolo.errors import UsageError
    from tphyolo.flags import from_flags
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.predict.draw_style import DrawStyle
    from tphyolo.predict.predictor import Predictor
    from tphyolo.predict.resume import check_resumed
    from tphyolo.predict.sources import resolve_source, source_names
    from tphyolo.predict.writers import coco_gt_image_ids
    from tphyolo.runtime.distributed import DistContext, broadcast_object, process_group
    from tphyolo.runtime.run_dir import OutputDir, removed_if_left_empty

    if args.resume is not None:
        args = resumed_args(args)
    elif args.source is None or args.weights is None:
        raise UsageError("--source and --weights are required (unless --resume RUN_DIR)")
    device = inference_device(args.runtime)
    slicing = slice_config(args)
    raster = raster_source(args)  # a raster runs tile by tile; its tiles are the slices
    style = from_flags(DrawStyle, args)
    files = resolve_source(args.source)
    if args.resume is not None:
        gone = check_resumed(args.saved_run, args.weights, files, where=str(args.resume / SETTINGS_FILE))
        for source in gone:
            print(f"tphyolo predict: warning: {source} of the run is gone; the rest goes on", file=sys.stderr)
    image_ids = None
    if args.coco_gt is not None:
        image_ids = coco_gt_image_ids(args.coco_gt)
        missing = [name for name in source_names(files) if name not in image_ids]
        if missing:
            raise ValueError(f"{args.coco_gt}: no image named {missing[0]!r} ({len(missing)} source file(s) missing)")
    dist = DistContext.from_env()  # under torchrun: the ranks share the files, rank 0 names the folder
    with process_group(dist, device):
        predictor = Predictor(
            args.weights,
            from_flags(InferenceConfig, args),
            runtime=args.runtime,
            device=device,
            slice=None if raster else slicing,
            model_weights=args.model_weights,
            **classifier_settings(args),
        )
        save_dir = args.resume
        if save_dir is None:
            save_dir = from_flags(OutputDir, args).create("runs/predict") if dist.is_main else None
            save_dir = Path(broadcast_object(dist, None if save_dir is None else str(save_dir)))
        with removed_if_left_empty(save_dir if dist.is_main and args.resume is None else None):
            if raster is not None:
                settings = None if args.resume is not None else saved_settings(args)
                run_raster(save_dir, predictor, raster, args, slicing, dist=dist, settings=settings,
                           settings_file=save_dir / SETTINGS_FILE)  # fmt: skip
                return 0
            result = _predict_into(save_dir, predictor, files, args, style=style, image_ids=image_ids, dist=dist)
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


def _predict_into(save_dir, predictor, files, args: argparse.Namespace, *, style, image_ids, dist):
    """Predict the files (this rank's share) into `save_dir`, writing each output as its frame is done."""
    from tqdm import tqdm

    from tphyolo.data.files.atomic import write_text_atomic
    from tphyolo.predict.resume import run_fingerprint
    from tphyolo.predict.run import predict_into
    from tphyolo.predict.writers import PredictionWriter

    writer = PredictionWriter(
        save_dir,
        names=predictor.names,
        save_img=not args.no_save_img,
        save_txt=args.save_txt,
        save_conf=args.save_conf,
        save_visdrone=args.save_visdrone,
        save_crop=args.save_crop,
        style=style,
    )

    def skip(path, error: Exception) -> None:
        tqdm.write(f"tphyolo predict: skipped {describe_error(error)}", file=sys.stderr)

    def note(text: str) -> None:  # a partial JPEG, the first of several frames
        tqdm.write(f"tphyolo predict: warning: {text}", file=sys.stderr)

    if dist.is_main and args.resume is None:  # once the writer took the settings: a refusal leaves no folder
        record = {"argv": saved_settings(args), **run_fingerprint(args.weights, files)}
        write_text_atomic(save_dir / SETTINGS_FILE, yaml.safe_dump(record))

    return predict_into(
        predictor, files, writer, dist=dist, save_json=args.save_json, image_ids=image_ids,
        resume=args.resume is not None, vid_stride=args.vid_stride, on_skip=skip, on_note=note,
    )  # fmt: skip

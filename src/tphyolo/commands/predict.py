"""`tphyolo predict`: detect objects in images, folders, globs, .txt lists, videos and streams (a webcam index,
an rtsp/rtmp/http(s) video URL); write the results."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tphyolo.commands.inference_args import (
    add_classifier_flags,
    add_inference_flags,
    add_slice_flags,
    classifier_settings,
    inference_device,
    slice_settings,
)
from tphyolo.errors import describe_error
from tphyolo.flags import add_flags, bounded

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tphyolo.predict.draw_style import DrawStyle

    parser.add_argument(
        "--source",
        required=True,
        help="image, folder, glob, .txt list of files, video, webcam index (0) or rtsp/rtmp/http(s) video URL",
    )
    parser.add_argument(
        "--weights",
        nargs="+",
        required=True,
        help="checkpoint(s) or exported model(s) (.onnx, OpenVINO, .torchscript); several form an ensemble",
    )
    parser.add_argument(
        "--model-weights", nargs="+", type=bounded(float, 0), default=None, help="WBF weight of each model"
    )
    add_inference_flags(parser)
    add_classifier_flags(parser)
    add_slice_flags(parser)
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
    from tphyolo.flags import from_flags
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.predict.draw_style import DrawStyle
    from tphyolo.predict.predictor import Predictor
    from tphyolo.predict.sources import resolve_source, source_names
    from tphyolo.predict.writers import coco_gt_image_ids
    from tphyolo.runtime.run_dir import OutputDir, removed_if_left_empty

    device = inference_device(args.runtime)
    slicing = slice_config(args)
    style = from_flags(DrawStyle, args)
    files = resolve_source(args.source)
    image_ids = None
    if args.coco_gt is not None:
        image_ids = coco_gt_image_ids(args.coco_gt)
        missing = [name for name in source_names(files) if name not in image_ids]
        if missing:
            raise ValueError(f"{args.coco_gt}: no image named {missing[0]!r} ({len(missing)} source file(s) missing)")
    predictor = Predictor(
        args.weights,
        from_flags(InferenceConfig, args),
        runtime=args.runtime,
        device=device,
        slice=slicing,
        model_weights=args.model_weights,
        **classifier_settings(args),
    )
    save_dir = from_flags(OutputDir, args).create("runs/predict")
    with removed_if_left_empty(save_dir):
        return _predict_into(save_dir, predictor, files, args, style=style, image_ids=image_ids)


def _predict_into(save_dir, predictor, files, args: argparse.Namespace, *, style, image_ids) -> int:
    """Predict every file into `save_dir`, writing each output as its frame is done."""
    from tqdm import tqdm

    from tphyolo.predict.sources import count_frames
    from tphyolo.predict.writers import PredictionWriter

    writer = PredictionWriter(
        save_dir,
        names=predictor.names,
        save_img=not args.no_save_img,
        save_txt=args.save_txt,
        save_conf=args.save_conf,
        save_visdrone=args.save_visdrone,
        save_json=args.save_json,
        save_crop=args.save_crop,
        style=style,
        image_ids=image_ids,
    )
    count, warned = 0, 0
    skipped: list = []

    def skip(path, error: Exception) -> None:
        skipped.append(path)
        tqdm.write(f"tphyolo predict: skipped {describe_error(error)}", file=sys.stderr)

    try:  # the outputs of the images done are written whatever stops the loop
        stream = predictor.stream(files, on_skip=skip, vid_stride=args.vid_stride)
        total = count_frames(files, vid_stride=args.vid_stride)
        for frame, detections in tqdm(stream, total=total, unit="img", desc="predict"):
            for note in frame.notes:  # a partial JPEG, the first of several frames
                tqdm.write(f"tphyolo predict: warning: {note}", file=sys.stderr)
            warned += bool(frame.notes)
            writer.write(frame, detections)
            count += len(detections)
    finally:
        writer.close()
    done = len(files) - len(skipped)
    warnings = f" ({warned} with a warning)" if warned else ""
    print(f"{count} detections in {done} file(s){warnings}, {len(skipped)} skipped; results in {save_dir}")
    return 0

"""`tphyolo predict`: detect objects in images, folders, globs, .txt lists and videos; write the results."""

from __future__ import annotations

import argparse
from pathlib import Path

from tphyolo.engine.tta import DEFAULT_FLIPS, FLIPS, PAPER_SCALES

HELP = "detect objects in images or videos (TTA, sliced inference, ensembles)"
USES_RUNTIME = True


def add_inference_arguments(parser: argparse.ArgumentParser, *, conf: float, iou: float, batch: int) -> None:
    """Flags shared by `predict` and `val`: size, thresholds, precision, TTA, output folder."""
    parser.add_argument("--img", "--imgsz", dest="img", type=int, default=640, help="inference size, pixels")
    parser.add_argument("--batch", type=int, default=batch, help=f"images per forward pass (default: {batch})")
    parser.add_argument("--conf", type=float, default=conf, help=f"confidence threshold (default: {conf})")
    parser.add_argument("--iou", type=float, default=iou, help=f"NMS IoU threshold (default: {iou})")
    parser.add_argument("--max-det", type=int, default=500, help="most detections per image")
    parser.add_argument("--half", action="store_true", help="fp16 weights and inputs (CUDA only)")
    parser.add_argument("--augment", action="store_true", help="test-time augmentation")
    parser.add_argument(
        "--tta-scales",
        nargs="+",
        type=float,
        default=list(PAPER_SCALES),
        help="TTA input scales (default: %(default)s)",
    )
    parser.add_argument(
        "--tta-flips", nargs="+", choices=FLIPS, default=list(DEFAULT_FLIPS), help="TTA flips (default: %(default)s)"
    )
    parser.add_argument("--merge", choices=("wbf", "nms"), default="wbf", help="how TTA/ensemble runs are merged")
    parser.add_argument("--merge-iou", type=float, default=None, help="merge IoU threshold (WBF default 0.55)")
    parser.add_argument("--project", default=None, help="output root (default: runs/<command>)")
    parser.add_argument("--name", default="exp", help="output folder under --project")
    parser.add_argument("--exist-ok", action="store_true", help="reuse an existing output folder")


def check_weights(paths: list[str]) -> None:
    """One-line errors for weights files that are missing, before anything is loaded."""
    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"weights file {path} does not exist")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", required=True, help="image, folder, glob, .txt list of files, or video")
    parser.add_argument("--weights", nargs="+", required=True, help="checkpoint file(s); several form an ensemble")
    parser.add_argument("--model-weights", nargs="+", type=float, default=None, help="WBF weight of each model")
    add_inference_arguments(parser, conf=0.25, iou=0.45, batch=1)
    parser.add_argument("--classes", nargs="+", type=int, default=None, help="keep only these class ids")
    parser.add_argument("--agnostic-nms", action="store_true", help="suppress across classes")
    parser.add_argument("--slice", type=int, default=None, metavar="SIZE", help="sliced inference, window pixels")
    parser.add_argument("--overlap", type=float, default=0.2, help="slice overlap fraction (default: 0.2)")
    parser.add_argument("--slice-full", action="store_true", help="add a full-image pass to sliced inference")
    parser.add_argument("--no-save-img", action="store_true", help="do not write annotated images/videos")
    parser.add_argument("--save-txt", action="store_true", help="YOLO txt per image (labels/)")
    parser.add_argument("--save-conf", action="store_true", help="scores in --save-txt files")
    parser.add_argument("--save-visdrone", action="store_true", help="VisDrone submission txt per image (visdrone/)")
    parser.add_argument("--save-json", action="store_true", help="COCO results json (predictions.json)")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from tphyolo.engine.predict import Predictor
    from tphyolo.engine.slicing import SliceConfig
    from tphyolo.engine.sources import count_frames, resolve_source
    from tphyolo.engine.tta import TTAConfig
    from tphyolo.engine.writers import PredictionWriter, run_dir

    check_weights(args.weights)
    files = resolve_source(args.source)
    predictor = Predictor(
        args.weights,
        imgsz=args.img,
        conf=args.conf,
        iou=args.iou,
        max_det=args.max_det,
        classes=args.classes,
        agnostic=args.agnostic_nms,
        tta=TTAConfig(tuple(args.tta_scales), tuple(args.tta_flips)) if args.augment else None,
        slice=SliceConfig(args.slice, args.overlap, args.slice_full) if args.slice else None,
        merge=args.merge,
        merge_iou=args.merge_iou,
        model_weights=args.model_weights,
        runtime=args.runtime,
        half=args.half,
        batch_size=args.batch,
    )
    save_dir = run_dir(args.project or "runs/predict", args.name, exist_ok=args.exist_ok)
    writer = PredictionWriter(
        save_dir,
        names=predictor.names,
        save_img=not args.no_save_img,
        save_txt=args.save_txt,
        save_conf=args.save_conf,
        save_visdrone=args.save_visdrone,
        save_json=args.save_json,
    )
    count = 0
    try:
        for frame, detections in tqdm(predictor.stream(files), total=count_frames(files), unit="img", desc="predict"):
            writer.write(frame, detections)
            count += len(detections)
    finally:
        writer.close()
    print(f"{count} detections in {len(files)} file(s); results in {save_dir}")
    return 0

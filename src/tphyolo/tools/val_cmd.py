"""`tphyolo val`: score a checkpoint on a dataset split with a protocol of the registry (yolo, coco, visdrone)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tphyolo.data.report import format_problems
from tphyolo.data.scan import ScanOptions
from tphyolo.flags import add_flags, from_flags
from tphyolo.tools.inference_args import (
    add_classifier_flags,
    add_inference_flags,
    classifier_settings,
    inference_device,
)

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tphyolo.engine.inference import VAL_DEFAULTS
    from tphyolo.metrics.registry import PROTOCOLS

    parser.add_argument(
        "--weights",
        required=True,
        help="checkpoint (tphyolo or original TPH-YOLOv5/YOLOv5) or exported model (.onnx, OpenVINO, .torchscript)",
    )
    parser.add_argument("--data", required=True, help="dataset yaml, folder, or built-in name (visdrone, synthetic)")
    parser.add_argument(
        "--datasets-dir", default=None, help="folder that built-in configs' relative paths start from (./datasets)"
    )
    parser.add_argument("--task", choices=("val", "test"), default="val", help="split to evaluate (default: val)")
    add_inference_flags(parser, defaults=VAL_DEFAULTS, exclude=("classes", "agnostic"))
    add_classifier_flags(parser)
    parser.add_argument("--protocol", choices=list(PROTOCOLS), default="yolo", help="scoring rules (default: yolo)")
    parser.add_argument("--workers", type=int, default=2, help="data loading processes (default: 2)")
    add_flags(parser, ScanOptions)
    parser.add_argument("--save-json", action="store_true", help="COCO results json (predictions.json)")
    parser.add_argument("--save-txt", action="store_true", help="YOLO txt with scores per image (labels/)")
    parser.add_argument("--plots", action="store_true", help="PR/F1/P/R curves, confusion matrix, batch images")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the numbers to this json file")
    parser.add_argument("--verbose", action="store_true", help="per-class rows in the table (always for test)")


def run(args: argparse.Namespace) -> int:
    from tphyolo.data.dataset_config import load_data_config
    from tphyolo.data.letterbox import check_imgsz
    from tphyolo.data.loader import build_dataloader, build_dataset
    from tphyolo.engine.backends import load_backends
    from tphyolo.engine.evaluate import evaluate, format_results, results_json
    from tphyolo.engine.inference import InferenceConfig
    from tphyolo.engine.writers import OutputDir

    config = from_flags(InferenceConfig, args)
    settings = classifier_settings(args)
    device = inference_device(args.runtime)
    (backend,) = load_backends(args.weights, runtime=args.runtime, device=device)
    data = load_data_config(args.data, datasets_dir=args.datasets_dir)
    names = list(data.names) or backend.names
    if data.names and len(data.names) != len(backend.names):
        raise ValueError(f"{args.weights}: {len(backend.names)} classes, but {args.data} has {len(data.names)}")
    classifier = None
    if settings["classifier"] is not None:  # checked against the detector before any data is read
        from tphyolo.classify.classifier import as_classifier

        classifier = as_classifier(settings["classifier"], detector_names=backend.names, device=device,
                                   runtime=args.runtime, weight=settings["classifier_weight"])  # fmt: skip
    imgsz = check_imgsz(config.imgsz, backend.stride)
    dataset, scan = build_dataset(
        data, args.task, imgsz=imgsz, rect=True, batch_size=config.batch, stride=backend.stride,
        scan_cache=from_flags(ScanOptions, args).scan_cache,
    )  # fmt: skip
    if scan.report.problems:
        print(format_problems(args.task, scan), file=sys.stderr)
    loader = build_dataloader(dataset, batch_size=config.batch, workers=args.workers, pin_memory=device.type == "cuda")
    save_dir = from_flags(OutputDir, args).create("runs/val")
    results = evaluate(
        backend,
        loader,
        names=names,
        config=config,
        protocol=args.protocol,
        save_dir=save_dir,
        save_json=args.save_json,
        save_txt=args.save_txt,
        plots=args.plots,
        progress=True,
        classifier=classifier,
    )
    print(format_results(results, verbose=args.verbose or args.task == "test"))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results_json(results), indent=2))
    print(f"results in {save_dir}")
    return 0

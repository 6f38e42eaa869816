"""`tphyolo val`: score a checkpoint on a dataset split with a protocol of the registry (yolo, coco, visdrone)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tphyolo.commands.options.inference import (
    add_classifier_flags,
    add_inference_flags,
    add_slice_flags,
    classifier_settings,
    inference_device,
    slice_settings,
)
from tphyolo.data.scan_options import ScanOptions
from tphyolo.flags import NON_NEGATIVE, add_flags, from_flags

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tphyolo.infer.config import VAL_DEFAULTS
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
    add_slice_flags(parser)
    parser.add_argument("--protocol", choices=list(PROTOCOLS), default="yolo", help="scoring rules (default: yolo)")
    parser.add_argument(
        "--workers",
        type=NON_NEGATIVE.parser(int),
        default=2,
        help="data loading processes, at most the CPU cores (default: 2)",
    )
    add_flags(parser, ScanOptions)
    parser.add_argument("--save-json", action="store_true", help="COCO results json (predictions.json)")
    parser.add_argument("--save-txt", action="store_true", help="YOLO txt with scores per image (labels/)")
    parser.add_argument("--plots", action="store_true", help="PR/F1/P/R curves, confusion matrix, batch images")
    parser.add_argument(
        "--report",
        action="store_true",
        help="html evaluation report (report.html: AP by object size, error galleries) and evaluation.json, from "
        "which 'tphyolo report RUN_DIR' rebuilds it",
    )
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the numbers to this json file")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="per-class rows in the table (default: with 2 to 49 classes, or for test)",
    )


def run(args: argparse.Namespace) -> int:
    from tphyolo.evaluation.loop import format_results, results_json
    from tphyolo.evaluation.val import val
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.runtime.distributed import DistContext, process_group
    from tphyolo.runtime.run_dir import OutputDir

    config = from_flags(InferenceConfig, args)
    settings = classifier_settings(args)
    device = inference_device(args.runtime)
    output = from_flags(OutputDir, args)
    dist = DistContext.from_env()  # under torchrun, every rank runs its share and rank 0 scores and writes
    with process_group(dist, device):
        results = val(
            args.weights,
            args.data,
            config=config,
            task=args.task,
            protocol=args.protocol,
            runtime=args.runtime,
            device=device,
            datasets_dir=args.datasets_dir,
            workers=args.workers,
            scan_cache=from_flags(ScanOptions, args).scan_cache,
            save_dir=lambda: output.create("runs/val"),
            save_json=args.save_json,
            save_txt=args.save_txt,
            plots=args.plots,
            progress=True,
            on_problems=lambda report: print(report, file=sys.stderr),
            keep_images=args.report,
            slicing=slice_settings(args),
            **settings,
        )
    if not dist.is_main:
        return 0
    print(format_results(results, verbose=True if args.verbose or args.task == "test" else None))
    numbers = results_json(results)
    if args.report:
        numbers = _write_report(args, results, config=config)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(numbers, indent=2))
    print(f"results in {results.save_dir}")
    return 0


def _write_report(args: argparse.Namespace, results, *, config) -> dict:
    """Save the run's evaluation records and write its report into the run folder; returns the report's numbers
    (what `--json` writes with `--report`: the plain numbers plus sizes, images and dataset)."""
    from dataclasses import replace

    from tphyolo.report.records import Records, plain_settings
    from tphyolo.report.writer import report_run

    settings = {"weights": args.weights, "data": args.data, "task": args.task}
    slicing = slice_settings(args)
    settings |= config.settings_in_effect(runs_merged=config.augment or slicing is not None)  # one model
    if slicing is not None:
        settings["slice"] = slicing.size
    images = tuple(replace(r, path=str(Path(r.path).resolve())) for r in results.image_results)  # from any folder
    records = Records(protocol=args.protocol, max_det=config.max_det, names=results.names,
                      settings=plain_settings(settings), images=images, speed=results.speed)  # fmt: skip
    data, path = report_run(records, results.save_dir)
    print(f"report in {path}")
    return data.as_json()

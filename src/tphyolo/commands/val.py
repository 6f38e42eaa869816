"""`tphyolo val`: score a checkpoint on a dataset split with a protocol of the registry (yolo, coco, visdrone)."""

from __future__ import annotations

import argparse
import json
import sys
from functools import cache
from pathlib import Path

from tphyolo.commands.options.inference import (
    add_classifier_flags,
    add_inference_flags,
    add_slice_flags,
    classifier_settings,
    inference_device,
    inference_settings,
    slice_settings,
)
from tphyolo.evaluation.settings import ValConfig
from tphyolo.flags import add_flags, from_flags
from tphyolo.infer.config import VAL_DEFAULTS, InferenceConfig
from tphyolo.runtime.run_dir import OutputDir

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--weights",
        required=True,
        help="checkpoint (tphyolo or original TPH-YOLOv5/YOLOv5) or exported model (.onnx, OpenVINO, .torchscript)",
    )
    parser.add_argument("--data", required=True, help="dataset yaml, folder, or built-in name (visdrone, synthetic)")
    add_flags(parser, ValConfig)  # --task, --protocol, --workers, --save-json, --save-txt, --plots, ...
    add_inference_flags(parser, defaults=VAL_DEFAULTS, exclude=("classes", "agnostic"))
    add_classifier_flags(parser)
    add_slice_flags(parser)
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
    # torch-importing modules stay lazy: `tphyolo val -h` must not import torch
    from tphyolo.evaluation.results import format_results, results_json
    from tphyolo.evaluation.val import val
    from tphyolo.runtime.distributed import DistContext, process_group

    inference = inference_settings(args)
    output = from_flags(OutputDir, args)
    run_dir = cache(lambda: output.create("runs/val"))  # created once the data are loaded; the report writes there
    config = from_flags(ValConfig, args, save_dir=run_dir, progress=True, slicing=slice_settings(args),
                        on_problems=lambda report: print(report, file=sys.stderr),
                        **classifier_settings(args))  # fmt: skip
    device = inference_device(args.runtime)
    dist = DistContext.from_env()  # under torchrun, every rank runs its share and rank 0 scores and writes
    report = _report_writer(args, config, inference, run_dir) if args.report else None
    with process_group(dist, device):
        results = val(args.weights, args.data, config, inference=inference, runtime=args.runtime, device=device,
                      writers=[report] if report is not None else [])  # fmt: skip
    if not dist.is_main:
        return 0
    print(format_results(results, verbose=True if args.verbose or args.task == "test" else None))
    numbers = results_json(results)
    if report is not None:  # what `--json` writes with `--report`: the plain numbers plus sizes, images and dataset
        data, path = results.outputs[report.name]
        print(f"report in {path}")
        numbers = data.as_json()
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(numbers, indent=2))
    print(f"results in {results.save_dir}")
    return 0


def _report_writer(args: argparse.Namespace, config: ValConfig, inference: InferenceConfig, run_dir):
    """The writer of the run's evaluation records and its report, into the run folder."""
    from tphyolo.report.run_report import ReportWriter  # imports torch: lazy, as above

    settings = {"weights": args.weights, "data": args.data, "task": config.task}
    settings |= inference.settings_in_effect(runs_merged=inference.augment or config.slicing is not None)
    if config.slicing is not None:
        settings["slice"] = config.slicing.size
    return ReportWriter(run_dir, settings=settings, max_det=inference.max_det)

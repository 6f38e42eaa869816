"""`tphyolo val`: score a checkpoint on a dataset split with a protocol of the registry (yolo, coco, visdrone).
The run is `tphyolo.report.val_run.run_val`; this module parses its flags and prints the table."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from tphyolo.commands.options.detector import add_detector_flags, detector_spec, on_process_device
from tphyolo.errors import UsageError
from tphyolo.evaluation.jobs import ValJob
from tphyolo.evaluation.settings import ValConfig
from tphyolo.flags import add_flags, from_flags
from tphyolo.infer.config import VAL_DEFAULTS, InferenceConfig
from tphyolo.runtime.console import RunEvents
from tphyolo.runtime.run_dir import OutputDir

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="dataset yaml, folder, or built-in name (visdrone, synthetic)")
    add_flags(parser, ValConfig)  # --task, --protocol, --workers, --save-json, --save-txt, --plots, ...
    add_detector_flags(parser, defaults=VAL_DEFAULTS, exclude=("classes", "agnostic", "model_weights"))
    add_flags(parser, OutputDir)
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


def _job(args: argparse.Namespace) -> ValJob:
    """The run the flags ask for; UsageError for flags that do not go together."""
    if args.weights is None or len(args.weights) != 1:
        raise UsageError("--weights: give the one model to score (a checkpoint or an exported model)")
    detector = replace(detector_spec(args), weights=args.weights[0])
    return ValJob(detector, args.data, from_flags(ValConfig, args), report=args.report, json=args.json,
                  output=from_flags(OutputDir, args))  # fmt: skip


def nms_header(inference: InferenceConfig) -> str:
    """The line above the table: the suppression settings the scores depend on."""
    agnostic = "yes" if inference.agnostic else "no"
    return f"NMS: conf {inference.conf:g}, iou {inference.iou:g}, max_det {inference.max_det}, agnostic {agnostic}"


def run(args: argparse.Namespace) -> int:
    # torch-importing modules stay lazy: `tphyolo val -h` must not import torch
    from tphyolo.evaluation.results import format_results
    from tphyolo.report.val_run import run_val

    job = _job(args)
    job = replace(job, detector=on_process_device(job.detector, args.runtime))
    events = RunEvents(note=lambda report: print(report, file=sys.stderr), progress=True)
    run = run_val(job, runtime=args.runtime, events=events)
    if run is None:  # a torchrun process other than rank 0: rank 0 prints
        return 0
    print(nms_header(job.detector.inference))
    print(format_results(run.results, verbose=True if args.verbose or args.task == "test" else None))
    if run.report is not None:
        print(f"report in {run.report}")
    print(f"results in {run.results.save_dir}")
    return 0

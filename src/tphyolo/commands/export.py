"""`tphyolo export`: a checkpoint to ONNX, OpenVINO IR, TorchScript or a TensorRT engine, each file run once
after writing and compared with PyTorch; with `--int8`, quantized and scored against the float model.

The run is `tphyolo.export.exporter.run_export`; this module builds its job from the flags and prints what it
wrote, or why a file is not right (exit code 1).
"""

from __future__ import annotations

import argparse
import sys

from tphyolo.export.config import ExportConfig, ExportJob, ExportSource
from tphyolo.flags import add_flags, from_flags
from tphyolo.runtime.console import RunEvents


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, ExportSource)
    add_flags(parser, ExportConfig)


def run(args: argparse.Namespace) -> int:
    from tphyolo.export.exporter import run_export  # lazy: imports torch; 'tphyolo export -h' must not

    job = ExportJob(from_flags(ExportSource, args).weights, from_flags(ExportConfig, args))
    run = run_export(job, events=RunEvents(note=print))
    for problem in run.problems():
        print(f"tphyolo export: error: {problem}", file=sys.stderr)
    if not run.ok:
        return 1
    print(f"exported {', '.join(str(r.path) for r in run.results)}")
    return 0

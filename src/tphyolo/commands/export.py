"""`tphyolo export`: a checkpoint to ONNX, OpenVINO IR, TorchScript or a TensorRT engine, each file run once
after writing and compared with PyTorch; with `--int8`, quantized and scored against the float model."""

from __future__ import annotations

import argparse
import sys

from tphyolo.export.config import CALIBRATION_RANGES, ExportConfig, ExportSource
from tphyolo.flags import add_flags, from_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, ExportSource)
    add_flags(parser, ExportConfig)


def run(args: argparse.Namespace) -> int:
    from tphyolo.export.exporter import export_checkpoint  # lazy: imports torch; 'tphyolo export -h' must not

    cfg = from_flags(ExportConfig, args)
    results = export_checkpoint(args.weights, cfg, log=print)
    failed = [r for r in results if not r.ok]
    for result in failed:
        if result.accuracy is not None and result.accuracy.says_nothing:
            print(
                f"tphyolo export: error: {result.path}: the accuracy check says nothing: "
                f"{result.accuracy.unchecked_reason}; the file is kept and marked unchecked (check on data the "
                "model has learned, or give --no-accuracy-check)",
                file=sys.stderr,
            )
        elif not result.matches:
            print(
                f"tphyolo export: error: {result.path} differs from PyTorch by {result.max_error:.1e} relative, "
                f"above the tolerance {result.tolerance:.0e}",
                file=sys.stderr,
            )
        else:
            accuracy = result.accuracy
            other = next(r for r in CALIBRATION_RANGES if r != cfg.calib_ranges)
            hint = f" (--calib-ranges {other} may lose less)" if result.format == "openvino" else ""
            print(
                f"tphyolo export: error: {result.path} loses {accuracy.drop:.4f} mAP50 against the float model "
                f"({accuracy.float_map50:.4f} -> {accuracy.int8_map50:.4f}), above --max-drop {accuracy.max_drop}; "
                f"the file is kept{hint}",
                file=sys.stderr,
            )
    if failed:
        return 1
    print(f"exported {', '.join(str(r.path) for r in results)}")
    return 0

"""What `tphyolo predict` and `tphyolo val` share on the command line: the inference flags (derived from
`InferenceConfig`), the output-folder flags (`OutputDir`), the crop-classifier flags and the device check in
the flags' words."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any


def add_inference_flags(
    parser: argparse.ArgumentParser, *, defaults: Mapping[str, Any] | None = None, exclude: Iterable[str] = ()
) -> None:
    """The InferenceConfig flags (with this command's `defaults`, without `exclude`) and the OutputDir flags."""
    from tphyolo.flags import add_flags
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.runtime.run_dir import OutputDir

    add_flags(parser, InferenceConfig, defaults=defaults, exclude=exclude)
    add_flags(parser, OutputDir)


def add_classifier_flags(parser: argparse.ArgumentParser) -> None:
    """--classifier and --classifier-weight: the crop classifier that re-labels the detections of its classes."""
    parser.add_argument(
        "--classifier", default=None, metavar="PATH", help="crop classifier (tphyolo classify train) to re-label with"
    )
    parser.add_argument(
        "--classifier-weight",
        type=float,
        default=None,
        metavar="W",
        help="the classifier's share in [0, 1] (default: the one saved with it)",
    )


def classifier_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The `classifier` and `classifier_weight` keywords of Predictor and evaluate, checked in the flags' words."""
    from tphyolo.errors import UsageError

    if args.classifier_weight is not None:
        if args.classifier is None:
            raise UsageError("--classifier-weight needs --classifier")
        if not 0.0 <= args.classifier_weight <= 1.0:
            raise UsageError(f"--classifier-weight must be in [0, 1], got {args.classifier_weight}")
    return {"classifier": args.classifier, "classifier_weight": args.classifier_weight}


def inference_device(runtime):
    """The torch.device `runtime` runs on (under torchrun, this process's: the `LOCAL_RANK`-th of the devices
    named), checked by the runtime before anything is loaded."""
    from tphyolo.runtime.distributed import DistContext

    device = runtime.torch_device(DistContext.from_env().local_rank)
    try:
        runtime.check_device(device)
    except ValueError as error:
        if runtime.half:
            raise ValueError(f"--half needs a CUDA device, got {device}") from error
        raise
    return device

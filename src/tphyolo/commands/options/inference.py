"""What `tphyolo predict`, `tphyolo track` and `tphyolo val` share on the command line: the inference flags
(derived from `InferenceConfig`), the output-folder flags (`OutputDir`), the sliced-inference and crop-classifier
flags and the device check in the flags' words."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from tphyolo.flags import FRACTION


def add_inference_flags(
    parser: argparse.ArgumentParser, *, defaults: Mapping[str, Any] | None = None, exclude: Iterable[str] = ()
) -> None:
    """The InferenceConfig flags (with this command's `defaults`, without `exclude`) and the OutputDir flags."""
    from tphyolo.flags import add_flags
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.runtime.run_dir import OutputDir

    add_flags(parser, InferenceConfig, defaults=defaults, exclude=exclude)
    add_flags(parser, OutputDir)


def _slice_size(text: str) -> int | str:
    """An argparse `type` for --slice: "auto" or a window size in pixels within SIZE_BOUNDS."""
    from tphyolo.infer.slicing import AUTO, SIZE_BOUNDS

    return AUTO if text == AUTO else SIZE_BOUNDS.parser(int)(text)


_slice_size.__name__ = "size ('auto' or pixels)"  # argparse: "invalid size ('auto' or pixels) value: 'x'"


def add_slice_flags(parser: argparse.ArgumentParser) -> None:
    """--slice, --overlap, --slice-full, --slice-full-min, --skip-empty: sliced inference
    (`tphyolo.infer.slicing.SliceConfig`)."""
    from tphyolo.flags import NON_NEGATIVE
    from tphyolo.infer.slicing import DEFAULT_OVERLAP, OVERLAP_BOUNDS

    parser.add_argument(
        "--slice", type=_slice_size, default=None, metavar="SIZE",
        help="sliced inference: window pixels, or auto (the network input size)",
    )  # fmt: skip
    parser.add_argument(
        "--overlap",
        type=OVERLAP_BOUNDS.parser(float),
        default=DEFAULT_OVERLAP,
        help=f"slice overlap fraction, {OVERLAP_BOUNDS} (default: {DEFAULT_OVERLAP})",
    )
    parser.add_argument("--slice-full", action="store_true", help="add a full-image pass to sliced inference")
    parser.add_argument(
        "--slice-full-min", type=NON_NEGATIVE.parser(int), default=0, metavar="PIXELS",
        help="the full-image pass keeps only boxes whose longer side is at least this (default: 0, all)",
    )  # fmt: skip
    parser.add_argument("--skip-empty", action="store_true", help="do not run windows of one pixel value (NoData)")


def slice_settings(args: argparse.Namespace):
    """The SliceConfig of `--slice`, `--overlap`, `--slice-full`, `--slice-full-min`, `--skip-empty`, or None
    without `--slice`. Raises UsageError for slice flags given without `--slice` and for settings the SliceConfig
    refuses."""
    from tphyolo.errors import UsageError
    from tphyolo.infer.slicing import DEFAULT_OVERLAP, SliceConfig

    if args.slice is None:
        given = [
            name
            for name, on in (
                ("--overlap", args.overlap != DEFAULT_OVERLAP),
                ("--slice-full", args.slice_full),
                ("--slice-full-min", args.slice_full_min != 0),
                ("--skip-empty", args.skip_empty),
            )
            if on
        ]
        if given:
            raise UsageError(f"{' and '.join(given)} set(s) sliced inference up; add --slice SIZE or drop it")
        return None
    try:
        return SliceConfig(args.slice, args.overlap, args.slice_full, args.slice_full_min, args.skip_empty)
    except ValueError as error:
        raise UsageError(f"--slice {args.slice} --overlap {args.overlap}: {error}") from error


def add_classifier_flags(parser: argparse.ArgumentParser) -> None:
    """--classifier and --classifier-weight: the crop classifier that re-labels the detections of its classes."""
    parser.add_argument(
        "--classifier", default=None, metavar="PATH", help="crop classifier (tphyolo classify train) to re-label with"
    )
    parser.add_argument(
        "--classifier-weight",
        type=FRACTION.parser(float),
        default=None,
        metavar="W",
        help="the classifier's share in [0, 1] (default: the one saved with it)",
    )


def classifier_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The `classifier` and `classifier_weight` keywords of Predictor and evaluate, checked in the flags' words."""
    from tphyolo.errors import UsageError

    if args.classifier_weight is not None and args.classifier is None:
        raise UsageError("--classifier-weight needs --classifier")
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

"""What `tphyolo predict`, `tphyolo track` and `tphyolo val` share on the command line: the inference flags
(derived from `InferenceConfig`), the output-folder flags (`OutputDir`), the sliced-inference flags
(`SliceFlags`) and crop-classifier flags (`ClassifierFlags`), and the device check in the flags' words."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tphyolo.errors import InputError, UsageError
from tphyolo.flags import FRACTION, NON_NEGATIVE, add_flags, check_field_types, flag, from_flags
from tphyolo.infer.config import MODEL_CHOSEN, InferenceConfig
from tphyolo.infer.slicing import AUTO, DEFAULT_OVERLAP, MODEL, OVERLAP_BOUNDS, SIZE_BOUNDS, SliceConfig
from tphyolo.runtime.run_dir import OutputDir

_MODEL_DEFAULT_HELP = {  # what a setting of MODEL_CHOSEN is when its flag is not given
    "imgsz": "the checkpoint's training size, an export's own, else {}",
    "batch": "{}, at most a fixed-batch export's",
}


def add_inference_flags(
    parser: argparse.ArgumentParser, *, defaults: Mapping[str, Any] | None = None, exclude: Iterable[str] = ()
) -> None:
    """The InferenceConfig flags (with this command's `defaults`, without `exclude`) and the OutputDir flags."""
    add_model_chosen_flags(parser, defaults=defaults, exclude=exclude)
    add_flags(parser, OutputDir)


def add_model_chosen_flags(
    parser: argparse.ArgumentParser, *, defaults: Mapping[str, Any] | None = None, exclude: Iterable[str] = ()
) -> None:
    """The InferenceConfig flags (with this command's `defaults`, without `exclude`), those of `MODEL_CHOSEN`
    parsed to None when not given, so that `inference_settings` leaves them to the models."""
    defaults, exclude = dict(defaults or {}), set(exclude)
    fallbacks = {name: defaults.get(name, getattr(InferenceConfig, name)) for name in MODEL_CHOSEN
                 if name not in exclude}  # fmt: skip
    add_flags(parser, InferenceConfig, defaults=defaults | dict.fromkeys(fallbacks), exclude=exclude)
    for action in parser._actions:  # argparse has no public lookup of an action by destination
        if action.dest in fallbacks:
            action.help = f"{action.help} (default: {_MODEL_DEFAULT_HELP[action.dest].format(fallbacks[action.dest])})"
    parser.set_defaults(model_chosen_fallbacks=fallbacks)


def inference_settings(args: argparse.Namespace) -> InferenceConfig:
    """The InferenceConfig of the parsed flags: the settings of `MODEL_CHOSEN` not given (None) are the
    command's defaults, left to the models to settle (`from_model`) once they are loaded."""
    fallbacks = getattr(args, "model_chosen_fallbacks", {})
    left = tuple(name for name, value in fallbacks.items() if getattr(args, name) is None)
    return from_flags(InferenceConfig, args, **{name: fallbacks[name] for name in left}, from_model=left)


def _slice_size(text: str) -> int | str:
    """An argparse `type` for --slice: "auto", 0 (no slicing) or a window size in pixels within SIZE_BOUNDS."""
    if text in (AUTO, "0"):
        return AUTO if text == AUTO else 0
    return SIZE_BOUNDS.parser(int)(text)


_slice_size.__name__ = "size ('auto', 0 or pixels)"  # argparse: "invalid size ('auto', 0 or pixels) value: 'x'"


@dataclass(frozen=True)
class SliceFlags:
    """Sliced inference as the command line says it: `SliceConfig`'s settings; no `--slice` leaves it to the model
    (a checkpoint trained on tiles slices at its tile size, others run whole images), `--slice 0` is none."""

    slice: int | str | None = flag(
        None, "--slice", convert=_slice_size, metavar="SIZE",
        help="sliced inference: window pixels, auto (the network input size) or 0 (none); default: a checkpoint "
        "trained with --tile slices at its tile size, other models run whole images",
    )  # fmt: skip
    overlap: float = flag(DEFAULT_OVERLAP, "--overlap", bounds=OVERLAP_BOUNDS,
                          help=f"slice overlap fraction, {OVERLAP_BOUNDS}")  # fmt: skip
    slice_full: bool = flag(False, "--slice-full", help="add a full-image pass to sliced inference")
    slice_full_min: int = flag(0, "--slice-full-min", bounds=NON_NEGATIVE, metavar="PIXELS",
                               help="the full-image pass keeps only boxes whose longer side is at least this (0: "
                               "all)")  # fmt: skip
    skip_empty: bool = flag(False, "--skip-empty", help="do not run windows of one pixel value (NoData)")

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds

    def config(self) -> SliceConfig | None:
        """The SliceConfig; without `--slice` SliceConfig(MODEL) (the model's, `settled_slicing`); None for
        `--slice 0`. Raises UsageError for slice flags given without `--slice` or with `--slice 0`, and for
        settings the SliceConfig refuses."""
        if self.slice in (None, 0):
            given = [name for name, on in (("--overlap", self.overlap != DEFAULT_OVERLAP),
                                           ("--slice-full", self.slice_full),
                                           ("--slice-full-min", self.slice_full_min != 0),
                                           ("--skip-empty", self.skip_empty)) if on]  # fmt: skip
            if given:
                raise UsageError(f"{' and '.join(given)} set(s) sliced inference up; add --slice SIZE or drop it")
            return SliceConfig(MODEL) if self.slice is None else None
        try:
            return SliceConfig(self.slice, self.overlap, self.slice_full, self.slice_full_min, self.skip_empty)
        except ValueError as error:
            raise UsageError(f"--slice {self.slice} --overlap {self.overlap}: {error}") from error


def add_slice_flags(parser: argparse.ArgumentParser) -> None:
    """--slice, --overlap, --slice-full, --slice-full-min, --skip-empty: sliced inference (`SliceFlags`)."""
    add_flags(parser, SliceFlags)


def slice_settings(args: argparse.Namespace) -> SliceConfig | None:
    """The SliceConfig of the slice flags in `args` (`SliceFlags.config`)."""
    return from_flags(SliceFlags, args).config()


@dataclass(frozen=True)
class ClassifierFlags:
    """The crop classifier that re-labels the detections of its classes, as Predictor and evaluate take it."""

    classifier: str | None = flag(None, "--classifier", metavar="PATH",
                                  help="crop classifier (tphyolo classify train) to re-label with")  # fmt: skip
    classifier_weight: float | None = flag(
        None, "--classifier-weight", bounds=FRACTION, metavar="W",
        help="the classifier's share in [0, 1] (default: the one saved with it)",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds


def add_classifier_flags(parser: argparse.ArgumentParser) -> None:
    """--classifier and --classifier-weight (`ClassifierFlags`)."""
    add_flags(parser, ClassifierFlags)


def classifier_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The `classifier` and `classifier_weight` keywords of Predictor and evaluate, checked in the flags' words."""
    if args.classifier_weight is not None and args.classifier is None:
        raise UsageError("--classifier-weight needs --classifier")
    return {"classifier": args.classifier, "classifier_weight": args.classifier_weight}


def inference_device(runtime):
    """The torch.device `runtime` runs on (under torchrun, this process's: the `LOCAL_RANK`-th of the devices
    named), checked by the runtime before anything is loaded."""
    device = runtime.process_device()
    try:
        runtime.check_device(device)
    except ValueError as error:
        if runtime.half:
            raise InputError(f"--half needs a CUDA device, got {device}") from error
        raise
    return device

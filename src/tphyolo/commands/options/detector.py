"""The detector's flags, declared once for every command that runs one (predict, track, val, serve, analyze): the
models and crop classifier (`DetectorFlags`), the inference settings (`InferenceConfig`'s fields) and sliced
inference (`SliceConfig`'s fields). `detector_spec(args)` makes the `DetectorSpec` they describe, which the
command's job holds; `inference_device` is the device it runs on, checked in the flags' words, and
`on_process_device` puts it in the spec.

    add_detector_flags(parser, defaults={"conf": TRACK_CONF})
    spec = detector_spec(parser.parse_args(argv))  # None without --weights
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tphyolo.errors import InputError, UsageError
from tphyolo.flags import FRACTION, NON_NEGATIVE, add_flags, check_field_types, flag, flag_spec, from_flags
from tphyolo.infer.config import MODEL_CHOSEN, InferenceConfig
from tphyolo.infer.slicing import MODEL, NO_SLICING, SliceConfig
from tphyolo.infer.spec import DetectorSpec

_MODEL_DEFAULT_HELP = {  # what a setting of MODEL_CHOSEN is when its flag is not given
    "imgsz": "the checkpoint's training size, an export's own, else {}",
    "batch": "{}, at most a fixed-batch export's",
}


@dataclass(frozen=True)
class DetectorFlags:
    """The detector's settings that are neither InferenceConfig's nor SliceConfig's: its models (`weights`, each
    with its WBF weight in `model_weights`) and the crop classifier that re-labels the detections of its classes
    (`classifier`, with its share `classifier_weight`). Fields of `DetectorSpec`, each a flag."""

    weights: tuple[str, ...] | None = flag(
        None, "--weights",
        help="checkpoint(s) or exported model(s) (.onnx, OpenVINO, .torchscript, .pt2); several form an ensemble",
    )  # fmt: skip
    model_weights: tuple[float, ...] | None = flag(None, "--model-weights", bounds=NON_NEGATIVE,
                                                   help="WBF weight of each model")  # fmt: skip
    classifier: str | None = flag(None, "--classifier", metavar="PATH",
                                  help="crop classifier (tphyolo classify train) to re-label with")  # fmt: skip
    classifier_weight: float | None = flag(
        None, "--classifier-weight", bounds=FRACTION, metavar="W",
        help="the classifier's share in [0, 1] (default: the one saved with it)",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds


def add_detector_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    defaults: Mapping[str, Any] | None = None,
    exclude: Iterable[str] = (),
) -> None:
    """Every flag of the detector (`DetectorFlags`, `InferenceConfig`, `SliceConfig`), without the fields named
    in `exclude` and with this command's `defaults` for InferenceConfig's (e.g. track's conf)."""
    exclude = set(exclude)
    add_flags(parser, DetectorFlags, exclude=exclude)
    inference = {field.name for field in dataclasses.fields(InferenceConfig)}
    add_model_chosen_flags(parser, defaults=defaults, exclude=exclude & inference)
    add_flags(parser, SliceConfig, exclude=exclude)


def detector_spec(args: argparse.Namespace) -> DetectorSpec | None:
    """The DetectorSpec of the flags `add_detector_flags` added (None without --weights; its runtime and device
    are left to the run). Raises UsageError for flags that do not go together (`--classifier-weight` without
    `--classifier`, slice flags without `--slice`)."""
    models = from_flags(DetectorFlags, args)
    if models.classifier_weight is not None and models.classifier is None:
        raise UsageError("--classifier-weight needs --classifier")
    if models.weights is None:
        return None
    return DetectorSpec(models.weights, inference=inference_settings(args), model_weights=models.model_weights,
                        slicing=slice_settings(args), classifier=models.classifier,
                        classifier_weight=models.classifier_weight)  # fmt: skip


def slice_settings(args: argparse.Namespace) -> SliceConfig | None:
    """The SliceConfig of the parsed flags: without `--slice` SliceConfig() (the model's, `settled_slicing`);
    None for `--slice 0`. Raises UsageError for slice flags given without `--slice` or with `--slice 0`, and for
    settings the SliceConfig refuses."""
    if args.size in (MODEL, NO_SLICING):
        given = [flag_spec(field).names[0] for field in dataclasses.fields(SliceConfig)
                 if field.name != "size" and getattr(args, field.name) != field.default]  # fmt: skip
        if given:
            raise UsageError(f"{' and '.join(given)} set(s) sliced inference up; add --slice SIZE or drop it")
        return SliceConfig() if args.size == MODEL else None
    try:
        return from_flags(SliceConfig, args)
    except ValueError as error:
        raise UsageError(f"--slice {args.size} --overlap {args.overlap}: {error}") from error


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


def on_process_device(spec: DetectorSpec | None, runtime) -> DetectorSpec | None:
    """`spec` with the device this process computes on (`inference_device`: checked in the flags' words); None
    stays None (a job without a detector)."""
    return None if spec is None else dataclasses.replace(spec, device=str(inference_device(runtime)))


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

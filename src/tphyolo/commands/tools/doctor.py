"""`tphyolo doctor`: print what this environment can run (`tphyolo.doctor.report()`), with a fix for each
problem; each slow probe announces itself on stderr before it starts. `tphyolo doctor --tune` measures this
machine's training layout and precision for an architecture (`tphyolo.runtime.probe.tune`) and, with
`--weights`, the bf16 check of that checkpoint compiled to OpenVINO (`tphyolo.evaluation.bf16_check`), and keeps
them: the only commands that time anything to decide how later runs run."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.flags import add_flags, check_field_types, flag
from tphyolo.runtime.install import PairProblem

TUNE_MODEL = "tph-yolov5n"  # the README main job's model
TUNE_IMGSZ = 320  # and its size


@dataclass(frozen=True)
class DoctorFlags:
    """How the report is printed, and whether torch.compile is probed (None: only where a GPU is visible)."""

    json: bool = flag(False, "--json", help="print the report as JSON")
    compile_check: bool | None = flag(
        None, "--compile-check",
        help="compile a tiny function with torch.compile (default: only where a GPU is visible; ~30 s on a CPU); "
        "--no-compile-check skips the probe",
    )  # fmt: skip
    tune: bool = flag(
        False, "--tune",
        help="measure and keep this machine's training layout and precision for --model (and, with --weights, "
        "whether that checkpoint runs OpenVINO bf16); later runs use what is kept instead of the rule",
    )  # fmt: skip
    model: str = flag(TUNE_MODEL, "--model", help="the architecture --tune measures (a name or model yaml)")
    img: int = flag(TUNE_IMGSZ, "--img", help="the image size --tune measures at", bounds=IMGSZ_BOUNDS)
    weights: str | None = flag(None, "--weights", help="a checkpoint whose OpenVINO bf16 --tune checks")

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, DoctorFlags)


def run(args: argparse.Namespace) -> int:
    """Exit code 0, or 1 when torch and torchvision do not go together (every other command fails then): the
    report is printed whole and the pair's problem is also one line on stderr."""
    from tphyolo import doctor  # lazy: imports torch; 'tphyolo doctor -h' must not

    if args.tune:
        return _tune(args)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    found = doctor.report(compile_check=args.compile_check, progress=progress)
    print(json.dumps(found.to_dict(), indent=2) if args.json else found.text())
    pair = found.torch["pair_problem"]
    if pair is not None:
        print(f"tphyolo doctor: error: {PairProblem(**pair)}", file=sys.stderr)
        return 1
    return 0


def _tune(args: argparse.Namespace) -> int:
    """Measure and keep the training decision for --model (and the bf16 check of --weights); one line each."""
    import torch

    from tphyolo.evaluation.bf16_check import tune_precision
    from tphyolo.models import build_model
    from tphyolo.runtime.probe import tune

    device = torch.device("cpu")
    print(f"tuning the training step of {args.model} at {args.img} px on the CPU ...", file=sys.stderr, flush=True)
    found = tune(build_model(args.model, num_classes=10), device, mode="train", architecture=args.model,
                 imgsz=args.img)  # fmt: skip
    print(f"train {args.model}: " + (found.line() if found else "one candidate on this CPU: the rule decides"))
    if args.weights:
        print(f"checking {args.weights} in OpenVINO bf16 against f32 ...", file=sys.stderr, flush=True)
        verdict = tune_precision(args.weights)
        print(f"{args.weights}: " + (verdict.line() if verdict else "no native bf16 (or no compiled model): fp32"))
    return 0

"""`tphyolo doctor`: print what this environment can run (`tphyolo.doctor.report()`), with a fix for each
problem; each slow probe announces itself on stderr before it starts."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

from tphyolo.flags import add_flags, flag
from tphyolo.runtime.install import PairProblem


@dataclass(frozen=True)
class DoctorFlags:
    """How the report is printed, and whether torch.compile is probed (None: only where a GPU is visible)."""

    json: bool = flag(False, "--json", help="print the report as JSON")
    compile_check: bool | None = flag(
        None, "--compile-check",
        help="compile a tiny function with torch.compile (default: only where a GPU is visible; ~30 s on a CPU); "
        "--no-compile-check skips the probe",
    )  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, DoctorFlags)


def run(args: argparse.Namespace) -> int:
    """Exit code 0, or 1 when torch and torchvision do not go together (every other command fails then): the
    report is printed whole and the pair's problem is also one line on stderr."""
    from tphyolo import doctor  # lazy: imports torch; 'tphyolo doctor -h' must not

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    found = doctor.report(compile_check=args.compile_check, progress=progress)
    print(json.dumps(found.to_dict(), indent=2) if args.json else found.text())
    pair = found.torch["pair_problem"]
    if pair is not None:
        print(f"tphyolo doctor: error: {PairProblem(**pair)}", file=sys.stderr)
        return 1
    return 0

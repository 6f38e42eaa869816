"""`tphyolo doctor`: print what this environment can run (`tphyolo.doctor.report()`), with a fix for each
problem; each slow probe announces itself on stderr before it starts."""

from __future__ import annotations

import argparse
import json
import sys

from tphyolo.runtime.install import PairProblem


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    group = parser.add_mutually_exclusive_group()  # three states: on, off, or None (only where a GPU is visible)
    group.add_argument(
        "--compile-check",
        dest="compile_check",
        action="store_true",
        default=None,
        help="compile a tiny function with torch.compile (default: only where a GPU is visible; ~30 s on a CPU)",
    )
    group.add_argument(
        "--no-compile-check", dest="compile_check", action="store_false", help="skip the torch.compile probe"
    )


def run(args: argparse.Namespace) -> int:
    """Exit code 0, or 1 when torch and torchvision do not go together (every other command fails then): the
    report is printed whole and the pair's problem is also one line on stderr."""
    from tphyolo import doctor  # imports torch: `tphyolo doctor -h` must not

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    found = doctor.report(compile_check=args.compile_check, progress=progress)
    print(json.dumps(found.to_dict(), indent=2) if args.json else found.text())
    pair = found.torch["pair_problem"]
    if pair is not None:
        print(f"tphyolo doctor: error: {PairProblem(**pair)}", file=sys.stderr)
        return 1
    return 0

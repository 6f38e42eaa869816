"""The command line of the study scripts that take the runtime flags of training (`attention_vs_original.py`,
`model_vs_original.py`, which import it from beside them): the script's own flags, a frozen dataclass of
`tphyolo.flags` fields with a `json` field, then the runtime flags; the rows it measures are printed as the
table of `tphyolo bench` (`print_report`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tphyolo.bench.report import Row, print_report
from tphyolo.errors import InputError
from tphyolo.flags import add_flags, from_flags
from tphyolo.runtime.config import RuntimeConfig, configure_process, runtime_from_args
from tphyolo.runtime.flags import add_runtime_arguments

Measure = Callable[..., tuple[list[Row], dict[str, Any]]]  # (flags, runtime, *, log) -> (rows, machine)


def study_parser(flags_type: type, doc: str) -> argparse.ArgumentParser:
    """A parser of `flags_type`'s flags and the runtime flags, described by the first paragraph of `doc`."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    add_flags(parser, flags_type)
    add_runtime_arguments(parser)
    return parser


def run_study(parser: argparse.ArgumentParser, flags_type: type, measure: Measure, argv: list[str] | None) -> int:
    """Parses `argv`, configures the process for its runtime, prints the rows and machine of
    `measure(flags, runtime, log=...)` (and writes them to `flags.json` when given); returns 0. Settings the
    flags, the runtime or `measure` refuse (ValueError, InputError) exit through the parser (status 2)."""
    args = parser.parse_args(argv)
    try:
        flags = from_flags(flags_type, args)
        runtime: RuntimeConfig = runtime_from_args(args)
    except ValueError as error:
        parser.error(str(error))
    configure_process(runtime)
    try:
        rows, machine = measure(flags, runtime, log=lambda line: print(line, flush=True))
    except InputError as error:
        parser.error(str(error))
    print_report(rows, machine, json_path=flags.json)
    return 0

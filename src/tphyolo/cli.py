"""The `tphyolo` command line.

Each subcommand lives in its own module, listed in `COMMANDS`. A command module provides:

- `HELP`: a one-line description shown by `tphyolo -h`;
- `add_arguments(parser)`: its flags;
- `run(args) -> int`: the command itself, returning the exit code;
- optionally `USES_RUNTIME = True`: the command gets the shared runtime flags (`--device`, `--amp`,
  `--compile`, ...) and `args.runtime`, a `RuntimeConfig` already applied by `configure_process`;
  `RUNTIME_INFERENCE = True` adds the inference-only `--half`.

This module is the only caller of `configure_process`: process-wide settings are applied here, after the
arguments are parsed and before the command touches CUDA.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from tphyolo import __version__

# Subcommand name -> module implementing it. Order is the order shown in `tphyolo -h`.
COMMANDS: dict[str, str] = {
    "train": "tphyolo.tools.train_cmd",
    "val": "tphyolo.tools.val_cmd",
    "doctor": "tphyolo.tools.doctor",
    "predict": "tphyolo.tools.predict_cmd",
    "eval": "tphyolo.tools.eval_cmd",
    "data": "tphyolo.tools.data_cmd",
    "convert": "tphyolo.tools.convert_cmd",
    "bench": "tphyolo.tools.bench_cmd",
    "profile": "tphyolo.tools.profile_cmd",
    "classify": "tphyolo.tools.classify_cmd",
}


class UsageError(ValueError):
    """A bad value on the command line, found after parsing; reported in one line with exit code 2."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} -h')\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every subcommand's flags."""
    from tphyolo.runtime import add_runtime_arguments

    parser = _Parser(prog="tphyolo", description="TPH-YOLOv5 family for small objects in drone imagery.")
    parser.add_argument("--version", action="version", version=f"tphyolo {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        if getattr(module, "USES_RUNTIME", False):
            add_runtime_arguments(sub, inference=getattr(module, "RUNTIME_INFERENCE", False))
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: `sys.argv[1:]`), apply process settings, run the subcommand."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    module = args._module
    try:
        if getattr(module, "USES_RUNTIME", False):
            from tphyolo.runtime import configure_process, runtime_from_args

            args.runtime = runtime_from_args(args)
            configure_process(args.runtime)
        return int(module.run(args) or 0)
    except (UsageError, FileNotFoundError, NotADirectoryError, ValueError) as error:
        if os.environ.get("TPHYOLO_DEBUG"):
            raise
        print(f"tphyolo {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tphyolo {args.command}: interrupted", file=sys.stderr)
        return 130

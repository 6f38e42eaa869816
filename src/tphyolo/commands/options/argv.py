"""Command lines spelled back from parsed settings, and read again from a run folder: what `train` relaunches
itself under torchrun with, and what a `predict` run folder of an older version kept (args.yaml with 'argv'; run
folders now keep the job, `tphyolo.runtime.run_dir.job_data`), read once to convert it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tphyolo.errors import InputError, UsageError
from tphyolo.yaml_files import load_yaml_file


def flags_for(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """Command-line flags that make `parser` parse to the values in `args`: one per destination whose value
    differs from its default, spelled by the first of its flags that can give that value. Values are joined
    with '=' so that values starting with '-' stay values."""
    argv: list[str] = []
    by_dest: dict[str, list[argparse.Action]] = {}
    for action in parser._actions:  # argparse has no public list of a parser's actions
        if action.option_strings and action.dest != argparse.SUPPRESS:
            by_dest.setdefault(action.dest, []).append(action)
    for dest, actions in by_dest.items():
        if not hasattr(args, dest) or getattr(args, dest) == actions[0].default:
            continue
        argv += _spell(dest, getattr(args, dest), actions)
    return argv


def _spell(dest: str, value: object, actions: list[argparse.Action]) -> list[str]:
    for action in actions:
        name = action.option_strings[0]
        if isinstance(action, argparse.BooleanOptionalAction) and isinstance(value, bool):
            return [name if value else next(o for o in action.option_strings if o.startswith("--no-"))]
        if action.nargs in (0, "?") and action.const == value:
            return [name]  # a switch, or a bare optional-value flag (--resume, --compile)
        if isinstance(action, argparse._AppendAction):
            return [f"{name}={v}" for v in value]
        if isinstance(value, (list, tuple)) and (action.nargs in ("+", "*") or isinstance(action.nargs, int)):
            return [name, *map(str, value)]
        if action.nargs != 0:
            return [f"{name}={value}"]
    raise ValueError(f"no flag of {[a.option_strings[0] for a in actions]} gives {dest}={value!r}")


class _SavedArgvParser(argparse.ArgumentParser):
    """A parser of a run folder's saved argv: a bad value raises ValueError, for the caller to name the file."""

    def error(self, message: str):  # noqa: ANN201 - argparse's hook, which must not return
        raise InputError(message)


def read_saved_run(
    add_arguments: Callable[[argparse.ArgumentParser], object],
    run_dir: Path,
    settings_file: str,
    *,
    prog: str,
    kind: str,
) -> tuple[argparse.Namespace, dict]:
    """The flags saved in `run_dir`/`settings_file` (a mapping with an 'argv' list), parsed by a parser of
    `add_arguments`, and the mapping. Raises UsageError when there is no such file (not a `kind` folder), and
    ValueError naming it for a file that is not such a mapping or a flag its parser refuses."""
    path = run_dir / settings_file
    if not path.is_file():
        raise UsageError(f"--resume {run_dir}: not a {kind} folder (no {settings_file})")
    saved = load_yaml_file(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("argv"), list):
        raise InputError(f"{path}: expected a mapping with an 'argv' list")
    parser = _SavedArgvParser(prog=prog, add_help=False)
    add_arguments(parser)
    try:
        return parser.parse_args([str(word) for word in saved["argv"]]), saved
    except ValueError as error:
        raise InputError(f"{path}: 'argv' (the run's saved settings): {error}") from None

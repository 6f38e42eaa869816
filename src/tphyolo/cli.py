"""The `tphyolo` command line.

Each subcommand lives in its own module, listed with its one-line help in `COMMANDS`. A command module
provides:

- `add_arguments(parser)`: its flags (a command with actions of their own, as `classify train|val`, adds them
  as subparsers and returns them: they get the runtime flags);
- `run(args) -> int`: the command itself, returning the exit code;
- optionally `USES_RUNTIME = True`: the command gets the shared runtime flags (`--device`, `--amp`,
  `--compile`, ...) and `args.runtime`, a `RuntimeConfig` already applied by `configure_process`;
  `RUNTIME_INFERENCE = True` adds the inference-only `--half`.

`main` imports only the module of the command it runs, so `tphyolo --version` and `tphyolo -h` answer without
importing torch. This module is the only caller of `configure_process`: process-wide settings are applied
here, after the arguments are parsed and before the command touches CUDA.

Error policy: a bad input or a fault (`BAD_INPUT`: every OSError — no space left, read-only, permission denied,
missing file —, an undecodable image or yaml, a value that fails validation: the package's `InputError`) ends
the command with one line on stderr, `tphyolo COMMAND: error: PATH: cause`, and exit code 2, as does a torch
and torchvision that do not go together (both versions and the pip command of a matching pair:
`tphyolo.runtime.install`); any other error is a fault of the program and propagates with its traceback (exit
code 1); Ctrl-C ends it with exit code 130; a reader that closes the pipe early (`tphyolo ... | head`) ends it
quietly with exit code 141, as a shell pipeline expects. With `TPHYOLO_DEBUG=1` every error propagates with its
traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from tphyolo._version import __version__
from tphyolo.commands.options.ultralytics import translate
from tphyolo.commands.options.yolov5 import unknown_command_hint, unknown_flag_hints
from tphyolo.errors import InputError, UsageError, describe_error
from tphyolo.runtime.console import progress_output
from tphyolo.runtime.flags import add_runtime_arguments
from tphyolo.runtime.install import torch_install_checked

__all__ = ["BAD_INPUT", "COMMANDS", "Command", "UsageError", "build_parser", "main"]

# What ends a command with one line and exit code 2: a fault (every OSError, MemoryError), bad input the package
# finds (InputError: UsageError, ImageError, CheckpointError, invalid yaml, ...) and a text or json file that does
# not decode. Any other ValueError is a fault of the program: its traceback shows.
BAD_INPUT = (OSError, MemoryError, InputError, UnicodeError, json.JSONDecodeError)


class Command(NamedTuple):
    module: str  # the module implementing the command
    help: str  # one line, shown by `tphyolo -h` and atop `tphyolo COMMAND -h`


# Subcommand name -> command. Order is the order shown in `tphyolo -h`. A command's module is imported by name
# (importlib, in `build_parser`) only when that command is given: lazy, so that start-up and `-h` stay light.
COMMANDS: dict[str, Command] = {
    "train": Command(
        "tphyolo.commands.train", "train a model (default: tph-yolov5n on the built-in synthetic drone set)"
    ),
    "tune": Command(
        "tphyolo.commands.tune", "search training hyperparameters on Ray Tune (YOLOv5-style evolution, TPE, ASHA)"
    ),
    "val": Command(
        "tphyolo.commands.val", "evaluate a checkpoint on a dataset split (mAP table, plots, json/txt outputs)"
    ),
    "report": Command(
        "tphyolo.commands.tools.report", "rebuild the html evaluation report of a run folder (after val/eval --report)"
    ),
    "doctor": Command(
        "tphyolo.commands.tools.doctor",
        "check the environment: versions, GPUs, attention kernels, torch.compile, threads",
    ),
    "predict": Command(
        "tphyolo.commands.predict", "detect objects in images or videos (TTA, sliced inference, ensembles)"
    ),
    "serve": Command(
        "tphyolo.commands.serve", "an HTTP detection service (batching, load shedding, metrics; Ray Serve)"
    ),
    "track": Command(
        "tphyolo.commands.track",
        "follow objects through videos (ByteTrack, BoT-SORT with camera-motion compensation, OC-SORT); MOT files",
    ),
    "analyze": Command(
        "tphyolo.commands.analyze",
        "drone video analytics on tracks: line counts, zones and dwell, ground speed (km/h), heatmaps",
    ),
    "eval": Command(
        "tphyolo.commands.eval",
        "score saved detections or tracks against ground truth (VisDrone, COCO, YOLO; HOTA/CLEAR/IDF1)",
    ),
    "data": Command(
        "tphyolo.commands.data",
        "inspect datasets: 'data check --data X.yaml' scans and reports labels, classes, problems",
    ),
    "convert": Command(
        "tphyolo.commands.tools.convert",
        "convert checkpoints (original TPH-YOLOv5/YOLOv5 .pt -> tphyolo) or VisDrone annotations (-> YOLO)",
    ),
    "export": Command(
        "tphyolo.commands.export",
        "export a checkpoint to ONNX, OpenVINO, TorchScript or TensorRT, checked against PyTorch",
    ),
    "classify": Command(
        "tphyolo.commands.classify",
        "train or validate a crop classifier for classes a detector confuses (tphyolo classify train|val)",
    ),
    "bench": Command(
        "tphyolo.commands.tools.bench",
        "benchmark runtime variants, exported runtimes, data loading, start-up and the service on this machine",
    ),
    "profile": Command(
        "tphyolo.commands.tools.profile",
        "profile a few train or inference steps: chrome trace, top operators, time per module type",
    ),
}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2 (no usage dump), followed by a
    line for each of `notes`."""

    def error(self, message: str, notes: Iterable[str] = ()) -> None:  # type: ignore[override]
        lines = [f"{self.prog}: error: {message} (see '{self.prog} -h')", *(f"{self.prog}: {n}" for n in notes)]
        self.exit(2, "\n".join(lines) + "\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse's, but an unknown argument is reported by the (sub)command that was given it, with the
        closest flag of that command: `tphyolo val: error: unrecognized argument --imgsz-x; did you mean
        --imgsz? (see 'tphyolo val -h')`. A YOLOv5 flag tphyolo does not take gets a line saying what to do
        instead (`tphyolo.commands.options.yolov5`), in place of the closest flag. ultralytics' `key=value`
        and YOLOv5's `--switch=True` are read as the command's flags, one line on stderr saying what each became
        (`tphyolo.commands.options.ultralytics`); a key no flag takes is refused with what to type instead."""
        args = list(sys.argv[1:] if args is None else args)
        depth, owner = self.command_path(args)
        translation = translate(owner, args[depth:])
        if translation.unknown:
            word, instead = translation.unknown[0]
            command = owner.prog.split()[1] if len(owner.prog.split()) > 1 else ""
            hints = unknown_flag_hints(command, ["--" + word.split("=", 1)[0].replace("_", "-")])
            guess = f"; {instead}" if instead is not None and not hints else ""
            owner.error(f"unrecognized argument {word}{guess}", notes=hints)
        for note in translation.notes:
            print(f"{owner.prog}: {note}", file=sys.stderr)
        parsed, unknown = self.parse_known_args(args[:depth] + translation.argv, namespace)
        if unknown:
            owner = self.command_parser(parsed)
            command = owner.prog.split()[1] if len(owner.prog.split()) > 1 else ""
            hints = unknown_flag_hints(command, unknown)
            owner.error(owner.unknown_argument(unknown, suggest=not hints), notes=hints)
        return parsed

    def command_path(self, argv: Sequence[str]) -> tuple[int, argparse.ArgumentParser]:
        """(how many words of `argv` name the (sub)command, its parser): `classify train` is two words."""
        parser: argparse.ArgumentParser = self
        for depth, word in enumerate(argv):
            chooser = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            if chooser is None or word not in chooser.choices:
                return depth, parser
            parser = chooser.choices[word]
        return len(argv), parser

    def command_parser(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost (sub)command parser that `parsed` went through (`tphyolo classify train`'s for
        `classify train`)."""
        parser: argparse.ArgumentParser = self
        while True:
            chooser = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            name = getattr(parsed, chooser.dest, None) if chooser is not None else None
            if name not in (chooser.choices if chooser is not None else ()):
                return parser
            parser = chooser.choices[name]

    def unknown_argument(self, unknown: Sequence[str], *, suggest: bool = True) -> str:
        """The message for `unknown` arguments: the first unknown flag and (with `suggest`) the closest of this
        parser's flags, or the unknown words when none is a flag."""
        flag = next((word.split("=", 1)[0] for word in unknown if word.startswith("-")), None)
        if flag is None:
            return f"unrecognized arguments: {' '.join(unknown)}"
        close = difflib.get_close_matches(flag, list(self._option_string_actions), n=1, cutoff=0.6) if suggest else []
        return f"unrecognized argument {flag}" + (f"; did you mean {close[0]}?" if close else "")


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; only those named in `commands` (default: all) get their flags, which
    imports their modules."""
    with_flags = set(COMMANDS if commands is None else commands)
    parser = _Parser(prog="tphyolo", description="TPH-YOLOv5 family for small objects in drone imagery.")
    parser.add_argument("--version", action="version", version=f"tphyolo {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        if name in with_flags:
            _add_command_arguments(sub, importlib.import_module(command.module))
    return parser


def _add_command_arguments(sub: argparse.ArgumentParser, module) -> None:
    """The command's flags, and the runtime flags on its parser, or on the parsers of its actions when
    `add_arguments` returns them (`classify train|val`)."""
    sub.set_defaults(_module=module)
    takers = module.add_arguments(sub) or [sub]
    if getattr(module, "USES_RUNTIME", False):
        for parser in takers:
            add_runtime_arguments(parser, inference=getattr(module, "RUNTIME_INFERENCE", False))


def _command_name(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names: its first word that is not an option (the top level takes no values)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: `sys.argv[1:]`), apply process settings, run the subcommand."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name = _command_name(argv)
    parser = build_parser(commands=[name] if name in COMMANDS else [])
    if name is not None and name not in COMMANDS and (hint := unknown_command_hint(name)) is not None:
        parser.error(f"argument COMMAND: invalid choice: {name!r}", notes=[hint])  # YOLOv5's `detect`
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    module = args._module
    debug = bool(os.environ.get("TPHYOLO_DEBUG"))
    _configure_output(debug=debug)
    try:
        with torch_install_checked():
            if getattr(module, "USES_RUNTIME", False):
                from tphyolo.runtime.config import configure_process, runtime_from_args  # lazy: imports torch

                args.runtime = runtime_from_args(args)
                configure_process(args.runtime)
            with progress_output(True):  # tphyolo's log lines (progress of long steps) to stdout, for this command
                code = int(module.run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        # Nobody reads what is left: send it to /dev/null so that the exit flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except BAD_INPUT as error:
        if debug:
            raise
        print(f"tphyolo {args.command}: error: {describe_error(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tphyolo {args.command}: interrupted", file=sys.stderr)
        return 130


def _configure_output(*, debug: bool) -> None:
    """Messages name files whatever their names: a name that is not valid UTF-8 is printed with backslash
    escapes instead of failing the print. OpenCV's own log lines (a decoder's complaint about a file that is then
    reported in one line) show only with `debug`."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    if not debug:
        import cv2  # lazy: a second or more of start-up that 'tphyolo -h' and '<cmd> -h' do without

        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)

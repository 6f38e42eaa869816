"""`tphyolo train`: train a model; with no arguments, a small TPH model on the built-in synthetic set.

The flags are derived from `TrainConfig` (`tphyolo.flags`), plus `--resume` and the shared runtime flags. With
several GPUs (`--device 0,1`) outside torchrun, the command relaunches itself under torchrun with the settings
it parsed, spelled back as flags.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from pathlib import Path

from tphyolo.commands.options.argv import flags_for
from tphyolo.errors import UsageError
from tphyolo.flags import add_flags, from_flags, setting_name
from tphyolo.runtime.flags import add_runtime_arguments, parse_device
from tphyolo.training.config import TrainConfig, TrainResume

USES_RUNTIME = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, TrainConfig)
    add_flags(parser, TrainResume)


def command_parser() -> argparse.ArgumentParser:
    """A parser of this command's flags, runtime flags included (what `tphyolo train` parses)."""
    parser = argparse.ArgumentParser(prog="tphyolo train", add_help=False)
    add_arguments(parser)
    add_runtime_arguments(parser)
    return parser


def settings_given(args: argparse.Namespace, *, keep: tuple[str, ...] = ()) -> list[str]:
    """The flags of TrainConfig settings that `args` sets to other than their defaults (fields in `keep` aside)."""
    given, default = from_flags(TrainConfig, args), TrainConfig()
    return [
        setting_name(TrainConfig, f.name)
        for f in fields(TrainConfig)
        if f.name not in keep and getattr(given, f.name) != getattr(default, f.name)
    ]


def latest_last_checkpoint(project: str | Path) -> Path:
    """The most recently written weights/last.pt under `project`."""
    candidates = sorted(Path(project).glob("*/weights/last.pt"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise FileNotFoundError(f"--resume: no */weights/last.pt under {project}")
    return candidates[-1]


def run(args: argparse.Namespace) -> int:
    from tphyolo.runtime import distributed  # these import torch: `tphyolo train -h` must not
    from tphyolo.training.trainer import Trainer

    devices = parse_device(args.device)
    if len(devices) > 1 and "LOCAL_RANK" not in os.environ:
        args.runtime.torch_device()  # every GPU named must be visible before torchrun starts processes
        return distributed.launch_torchrun(["train", *flags_for(command_parser(), args)], nproc=len(devices))
    if args.resume is not None:
        ignored = settings_given(args, keep=("project",))
        if ignored:
            raise UsageError(
                f"--resume continues a run with its saved settings; {', '.join(ignored)} would be ignored: drop "
                "them (or start a new run with --weights)"
            )
        path = Path(args.resume) if args.resume else latest_last_checkpoint(args.project)
        trainer = Trainer.resume(path, args.runtime)
    else:
        trainer = Trainer(from_flags(TrainConfig, args), args.runtime)
    result = trainer.fit()
    if trainer.dist.is_main:
        print(f"results in {result.run_dir}; weights: {result.last}, {result.best}")
    return 0

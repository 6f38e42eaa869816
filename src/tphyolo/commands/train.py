"""`tphyolo train`: train a model; with no arguments, a small TPH model on the built-in synthetic set.

The flags are derived from `TrainConfig` (`tphyolo.flags`), plus `--resume` and the shared runtime flags. The
run is `tphyolo.training.job.run_train`; this module builds its job from the flags (and, for a relaunch under
torchrun over several GPUs, spells the flags it parsed back) and prints where the results are.
"""

from __future__ import annotations

import argparse

from tphyolo.commands.options.argv import flags_for
from tphyolo.flags import add_flags, from_flags
from tphyolo.runtime.flags import add_runtime_arguments
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


def run(args: argparse.Namespace) -> int:
    from tphyolo.training.job import TrainJob, run_train  # lazy: imports torch; `tphyolo train -h` must not

    job = TrainJob(from_flags(TrainConfig, args), args.resume)
    run = run_train(job, runtime=args.runtime, argv=["train", *flags_for(command_parser(), args)])
    if run.result is not None and run.is_main:
        print(f"results in {run.result.run_dir}; weights: {run.result.last}, {run.result.best}")
    return run.exit_code

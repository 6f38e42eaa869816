"""What one `tphyolo train` run is asked to do, and the one call that does it:

    run = run_train(TrainJob(TrainConfig(data="my.yaml", epochs=65)), runtime=RuntimeConfig(device="0"))
    run.result.best if run.result is not None else run.exit_code

A job is a new run of `config` or, with `resume`, the continuation of a saved run (its settings come from the
checkpoint: `config` may then set `project` alone, where the latest run is looked for). A job over several
GPUs (`runtime.device` "0,1") started outside torchrun is relaunched under torchrun, one process per GPU, with
the command line the caller gives (`argv`, e.g. the flags `tphyolo train` parsed, spelled back).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from tphyolo.errors import UsageError
from tphyolo.flags import setting_name
from tphyolo.runtime import distributed
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.flags import parse_device
from tphyolo.training.config import TrainConfig
from tphyolo.training.trainer import Trainer, TrainResult

RESUME_KEEPS = ("project",)  # the one setting a resumed run takes from the caller: where its run is looked for


@dataclass(frozen=True)
class TrainJob:
    """One run of `tphyolo train`: a new run of `config`, or with `resume` the run whose last.pt it names
    ("": the latest */weights/last.pt under `config.project`) continued with its saved settings."""

    config: TrainConfig = field(default_factory=TrainConfig)
    resume: str | None = None


@dataclass(frozen=True)
class TrainRun:
    """What `run_train` did: the `result` of the run this process trained and whether this process is the one
    that reports it (`is_main`, rank 0), or, when it relaunched itself under torchrun, no result and torchrun's
    `exit_code`."""

    result: TrainResult | None
    is_main: bool = True
    exit_code: int = 0


def settings_given(config: TrainConfig, *, keep: tuple[str, ...] = ()) -> list[str]:
    """The flags of the settings `config` sets to other than their defaults (fields in `keep` aside)."""
    default = TrainConfig()
    return [
        setting_name(TrainConfig, f.name)
        for f in fields(TrainConfig)
        if f.name not in keep and getattr(config, f.name) != getattr(default, f.name)
    ]


def latest_last_checkpoint(project: str | Path) -> Path:
    """The most recently written weights/last.pt under `project`."""
    candidates = sorted(Path(project).glob("*/weights/last.pt"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise FileNotFoundError(f"--resume: no */weights/last.pt under {project}")
    return candidates[-1]


def run_train(job: TrainJob, *, runtime: RuntimeConfig, argv: Sequence[str] | None = None) -> TrainRun:
    """Train `job` on `runtime` (see the module docstring). `argv`: the `tphyolo` command line of this job
    (`train` and its flags), which a job over several GPUs outside torchrun is relaunched with; without it such
    a job raises UsageError. Raises UsageError for settings given with `resume` (they would be ignored) and
    FileNotFoundError when there is no run to resume, before any run folder is made."""
    if len(parse_device(runtime.device)) > 1 and "LOCAL_RANK" not in os.environ:
        runtime.torch_device()  # every GPU named must be visible before torchrun starts processes
        if argv is None:
            raise UsageError(f"device {runtime.device}: several GPUs train under torchrun; start this under it")
        code = distributed.launch_torchrun(argv, nproc=len(parse_device(runtime.device)))
        return TrainRun(None, exit_code=code)
    if job.resume is not None:
        ignored = settings_given(job.config, keep=RESUME_KEEPS)
        if ignored:
            raise UsageError(
                f"--resume continues a run with its saved settings; {', '.join(ignored)} would be ignored: drop "
                "them (or start a new run with --weights)"
            )
        path = Path(job.resume) if job.resume else latest_last_checkpoint(job.config.project)
        trainer = Trainer.resume(path, runtime)
    else:
        trainer = Trainer(job.config, runtime)
    return TrainRun(trainer.fit(), is_main=trainer.dist.is_main)

"""TuneConfig: the settings of a hyperparameter search (the training settings of its trials are a TrainConfig).

Each field that is on the command line declares its flag here (`tphyolo.flags.flag`); `tphyolo tune` derives
its parser from these fields and TrainConfig's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from tphyolo.errors import InputError
from tphyolo.flags import check_field_types, flag, setting_name
from tphyolo.training.tune.searchers import SEARCHERS

# TrainConfig settings a search sets itself: trials write into the search's folder and validate every epoch.
SEARCH_OWNED = ("project", "name", "exist_ok", "val")
SCHEDULERS = ("fifo", "asha")  # fifo: every trial trains all its epochs; asha: Ray Tune's ASHA stops the worst
ASHA_REDUCTION = 2  # ASHA keeps the best 1/2 of the trials at each rung (successive halving)


@dataclass(frozen=True)
class TuneResume:
    """Which search `tphyolo tune --resume` continues (None: a new one); its field is also the flag."""

    resume: Path | None = flag(None, "--resume", metavar="RUN_DIR",
                               help="continue an interrupted search in RUN_DIR with its settings "
                               "(--trials may raise the count)")  # fmt: skip


@dataclass(frozen=True)
class TuneConfig:
    """A search: `trials` training runs, each with a hyp proposed by `searcher` from the space around the hyp
    file (`--hyp`, else the dataset's recipe).

    gpus_per_trial: None gives each trial one GPU when the cluster has GPUs and the device is not the CPU, else
        none; fractions share a GPU between trials. cpus_per_trial: CPUs Ray reserves per trial (and the
        threads the trial's process uses).
    space: a yaml of ranges that replace YOLOv5's evolve ranges (`space.py`); None: those ranges.
    grace_epochs: with the asha scheduler, epochs every trial trains before it can be stopped.
    address: None starts Ray in this process with this machine's CPUs and GPUs; "auto" or HOST:PORT joins a
        running cluster.
    """

    trials: int = flag(10, "--trials", help="training runs in the search")
    gpus_per_trial: float | None = flag(
        None, "--gpus-per-trial", help="GPUs per trial, fractions allowed (default: 1 with GPUs, else 0)"
    )
    cpus_per_trial: float = flag(1.0, "--cpus-per-trial", help="CPUs per trial")
    searcher: str = flag("evolve", "--searcher", choices=tuple(SEARCHERS),
                         help="evolve: YOLOv5-style evolution of the best so far; tpe: Optuna TPE; random")  # fmt: skip
    scheduler: str = flag("fifo", "--scheduler", choices=SCHEDULERS,
                          help="asha stops trials whose fitness trails at an epoch milestone")  # fmt: skip
    grace_epochs: int = flag(1, "--grace-epochs", help="epochs before ASHA may stop a trial")
    space: str | None = flag(None, "--space", help="yaml of search ranges (default: YOLOv5's evolve ranges)")
    address: str | None = flag(
        None, "--address", help="Ray cluster to join: auto or HOST:PORT (default: start Ray on this machine)"
    )
    dashboard: bool = flag(False, "--dashboard", help="start the Ray dashboard (off by default)")
    project: str = flag("runs/tune", "--project", help="folder of searches")
    name: str = flag("exp", "--name", help="search name (numbered name2, name3, ... unless --exist-ok)")
    exist_ok: bool = flag(False, "--exist-ok", help="reuse project/name instead of numbering a new one")

    def __post_init__(self) -> None:
        """Raises ValueError naming the flag of the first setting out of range."""
        check_field_types(self)
        if self.trials < 1:
            raise InputError(f"{setting_name(self, 'trials')} must be at least 1, got {self.trials}")
        if self.gpus_per_trial is not None and not 0 <= self.gpus_per_trial < math.inf:
            raise InputError(f"{setting_name(self, 'gpus_per_trial')} must be >= 0, got {self.gpus_per_trial}")
        if not 0 < self.cpus_per_trial < math.inf:
            raise InputError(f"{setting_name(self, 'cpus_per_trial')} must be > 0, got {self.cpus_per_trial}")
        if self.grace_epochs < 1:
            raise InputError(f"{setting_name(self, 'grace_epochs')} must be at least 1, got {self.grace_epochs}")
        if self.searcher not in SEARCHERS:
            raise InputError(f"{setting_name(self, 'searcher')} must be one of {sorted(SEARCHERS)}")
        if self.scheduler not in SCHEDULERS:
            raise InputError(f"{setting_name(self, 'scheduler')} must be one of {SCHEDULERS}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TuneConfig:
        """A config from saved settings, ignoring keys this version does not know."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

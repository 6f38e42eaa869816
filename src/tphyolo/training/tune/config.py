"""TuneConfig: the settings of a hyperparameter search (the training settings of its trials are a TrainConfig).

Each field that is on the command line declares its flag here (`tphyolo.flags.flag`); `tphyolo tune` derives
its parser from these fields and TrainConfig's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE, Bounds, check_field_types, flag
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

    trials: int = flag(10, "--trials", help="training runs in the search", bounds=AT_LEAST_ONE)
    gpus_per_trial: float | None = flag(
        None, "--gpus-per-trial", help="GPUs per trial, fractions allowed (default: 1 with GPUs, else 0)",
        bounds=NON_NEGATIVE,
    )  # fmt: skip
    cpus_per_trial: float = flag(1.0, "--cpus-per-trial", help="CPUs per trial", bounds=Bounds(0, low_open=True))
    searcher: str = flag("evolve", "--searcher", choices=tuple(SEARCHERS),
                         help="evolve: YOLOv5-style evolution of the best so far; tpe: Optuna TPE; random")  # fmt: skip
    scheduler: str = flag("fifo", "--scheduler", choices=SCHEDULERS,
                          help="asha stops trials whose fitness trails at an epoch milestone")  # fmt: skip
    grace_epochs: int = flag(1, "--grace-epochs", help="epochs before ASHA may stop a trial", bounds=AT_LEAST_ONE)
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
        check_field_types(self)  # types, choices and bounds

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TuneConfig:
        """A config from saved settings, ignoring keys this version does not know."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

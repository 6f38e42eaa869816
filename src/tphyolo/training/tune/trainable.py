"""One trial of a search, as it runs in the trial's process on the Ray cluster: a training run of the trainer.

`run_trial(config, setup=...)` is the function Ray Tune calls with the searcher's config (the searched hyp
values and the trial number). It writes the trial's whole hyp to `RUN/trials/trialN/hyp.yaml`, trains into that
folder with the search's training settings, logs to its train.log, and after each epoch reports its best epoch
so far (`trials.REPORT_KEYS`); a scheduler that stops the trial stops it there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.metrics import fitness
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.hooks.base import TrainHook
from tphyolo.training.trainer import Trainer
from tphyolo.training.tune.searchers import TRIAL_KEY
from tphyolo.training.tune.space import SearchSpace

TRIALS_DIR = "trials"


@dataclass(frozen=True)
class TrialSetup:
    """What every trial of a search shares: the training settings (paths absolute: a trial runs in a folder of
    Ray's), the runtime, the space, the search's run folder (absolute), and whether trials get a GPU."""

    train: TrainConfig
    runtime: RuntimeConfig
    space: SearchSpace
    run_dir: str
    gpu: bool


class ReportToTune(TrainHook):
    """After each epoch, hands the trial's best epoch so far, by fitness (0.1 mAP50 + 0.9 mAP50-95), to `report`
    (Ray Tune's `tune.report`, which may stop the trial there): `trials.REPORT_KEYS`."""

    def __init__(self, report: Callable[[dict[str, float]], Any]) -> None:
        self.report = report
        self.best: dict[str, float] = {}

    def after_epoch(self, trainer: Any, epoch: int, metrics: dict[str, float]) -> None:
        map50, map50_95 = metrics.get("metrics/mAP50", 0.0), metrics.get("metrics/mAP50-95", 0.0)
        score = fitness(map50, map50_95)
        if not self.best or score > self.best["fitness"]:
            self.best = {"fitness": score, "mAP50": map50, "mAP50-95": map50_95}
        self.report({**self.best, "epoch": epoch + 1})


def trial_config(setup: TrialSetup, number: int, values: dict[str, float]) -> TrainConfig:
    """The training settings of trial `number`: its hyp file written into its folder, the run in that folder."""
    folder = Path(setup.run_dir) / TRIALS_DIR / f"trial{number}"
    folder.mkdir(parents=True, exist_ok=True)
    hyp_file = folder / "hyp.yaml"
    write_text_atomic(hyp_file, yaml.safe_dump(setup.space.hyp(values), sort_keys=False))
    return replace(setup.train, hyp=str(hyp_file), project=str(folder.parent), name=folder.name, exist_ok=True)


def trial_dirname(trial: Any) -> str:
    """The name of a trial's folder of Ray's (under RUN/ray/sessionK): trialN, as its training folder."""
    return f"trial{trial.config[TRIAL_KEY]}"


def run_trial(config: dict[str, Any], *, setup: TrialSetup) -> None:
    """Train one trial (module docstring); called by Ray Tune in the trial's process."""
    from ray import tune

    number = int(config[TRIAL_KEY])
    cfg = trial_config(setup, number, {k: v for k, v in config.items() if k != TRIAL_KEY})
    runtime = replace(setup.runtime, device="0" if setup.gpu else "cpu")  # Ray shows a trial its GPUs only
    handler = logging.FileHandler(Path(cfg.project) / cfg.name / "train.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("tphyolo")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        Trainer(cfg, runtime, verbose=False, hooks=[ReportToTune(tune.report)]).fit()
    finally:
        logger.removeHandler(handler)
        handler.close()

"""The trainer's own hooks, which every run has, first and in this order: early stopping (`--patience`) and
results.png at the run's end (`--plots`)."""

from __future__ import annotations

import logging
from typing import Any

from tphyolo.training.hooks.base import TrainHook
from tphyolo.training.run_end import plot_run

LOGGER = logging.getLogger("tphyolo.train")


class EarlyStopping(TrainHook):
    """Stops the run once `cfg.patience` (> 0) epochs in a row brought no gain in fitness, counting on from a
    resumed checkpoint's count (`TrainProgress.epochs_without_gain`). An epoch gains when the trainer made it the
    best one (`progress.best_epoch`, which best.pt follows)."""

    def __init__(self) -> None:
        self.without_gain = 0

    def before_train(self, trainer: Any) -> None:
        self.without_gain = trainer.progress.epochs_without_gain

    def after_epoch(self, trainer: Any, epoch: int, metrics: dict[str, float]) -> bool:
        self.without_gain = 0 if trainer.progress.best_epoch == epoch else self.without_gain + 1
        patience = trainer.cfg.patience
        if 0 < patience <= self.without_gain:
            LOGGER.info("no improvement for %d epochs: stopping early at epoch %d", patience, epoch)
            return True
        return False


class PlotResults(TrainHook):
    """results.png from results.csv at the run's end, an interrupted run's too (`run_end.plot_run`)."""

    def after_train(self, trainer: Any, result: Any) -> None:
        plot_run(trainer.cfg, trainer.run_dir)

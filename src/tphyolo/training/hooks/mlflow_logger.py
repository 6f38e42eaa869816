"""An example hook: a training run logged to MLflow, which is an optional package (`pip install mlflow`)."""

from __future__ import annotations

import math
from typing import Any

from tphyolo.imports import require
from tphyolo.training.hooks.base import TrainHook


class MLflowLogger(TrainHook):
    """Logs the run to MLflow: its settings as params when it starts (`cfg.to_dict()`, and `run_dir`), each
    epoch's results.csv values as metrics at step = epoch, the final validation's metrics (prefixed `final/`)
    at the end. It logs into the active MLflow run, or starts one named after the run folder and ends it with the
    run (FINISHED, or FAILED when the run ended by an exception). NaN values (no validation) are left out.

    `tracking_uri`, `experiment`: passed to `mlflow.set_tracking_uri` / `mlflow.set_experiment` when given.
    Rank 0 alone logs. Without mlflow installed, building the hook raises one line saying how to install it.
    """

    def __init__(self, *, tracking_uri: str | None = None, experiment: str | None = None) -> None:
        self.mlflow = require("mlflow", purpose="MLflowLogger", install="pip install mlflow")
        self.tracking_uri, self.experiment = tracking_uri, experiment
        self.started = False

    def before_train(self, trainer: Any) -> None:
        if self.tracking_uri is not None:
            self.mlflow.set_tracking_uri(self.tracking_uri)
        if self.experiment is not None:
            self.mlflow.set_experiment(self.experiment)
        if self.mlflow.active_run() is None:
            self.mlflow.start_run(run_name=trainer.run_dir.name)
            self.started = True
        self.mlflow.log_params({**trainer.cfg.to_dict(), "run_dir": str(trainer.run_dir)})

    def after_epoch(self, trainer: Any, epoch: int, metrics: dict[str, float]) -> None:
        self.mlflow.log_metrics(_finite(metrics), step=epoch)

    def after_train(self, trainer: Any, result: Any) -> None:
        if result is not None:
            final = {f"final/{name}": value for name, value in result.final_metrics.items()}
            self.mlflow.log_metrics(_finite(final))
        if self.started:
            self.mlflow.end_run(status="FINISHED" if result is not None else "FAILED")
            self.started = False


def _finite(values: dict[str, float]) -> dict[str, float]:
    return {name: float(value) for name, value in values.items() if not math.isnan(value)}

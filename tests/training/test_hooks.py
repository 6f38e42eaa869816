"""Training hooks: the order and arguments of their calls, a hook that stops the run, early stopping as a hook
(the epochs it stops at, as the trainer's own rule did), and the MLflow logger with a fake `mlflow`."""

import math
import random
import sys
import types
from types import SimpleNamespace

import pytest

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.errors import InputError
from tphyolo.imports import MissingExtraError
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training import EarlyStopping, MLflowLogger, PlotResults, TrainHook
from tphyolo.training.config import TrainConfig
from tphyolo.training.log import read_results
from tphyolo.training.state import TrainProgress
from tphyolo.training.trainer import Trainer, train
from tphyolo.training.tune.trainable import ReportToTune

CPU = RuntimeConfig(device="cpu")


def tiny_config(data, project, **overrides) -> TrainConfig:
    values = dict(data=str(data), model="tph-yolov5n", imgsz=64, batch=4, epochs=2, workers=0, project=str(project),
                  name="run", plots=False, warmup_min_steps=1)  # fmt: skip
    return TrainConfig(**{**values, **overrides})


class Recorder(TrainHook):
    def __init__(self, name: str, calls: list) -> None:
        self.name, self.calls = name, calls

    def before_train(self, trainer):
        self.calls.append((self.name, "before_train"))

    def after_epoch(self, trainer, epoch, metrics):
        self.calls.append((self.name, epoch, dict(metrics)))

    def after_train(self, trainer, result):
        self.calls.append((self.name, "after_train", result))


class StopAfter(TrainHook):
    """A custom stop rule: stop once `epoch` is trained."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def after_epoch(self, trainer, epoch, metrics):
        return epoch >= self.epoch


def fake_mlflow(calls: list) -> types.ModuleType:
    """A stand-in for the `mlflow` package that records each call."""
    module = types.ModuleType("mlflow")
    state = {"run": None}

    def start_run(run_name=None):
        state["run"] = run_name
        calls.append(("start_run", run_name))

    def end_run(status="FINISHED"):
        state["run"] = None
        calls.append(("end_run", status))

    module.active_run = lambda: state["run"]
    module.start_run, module.end_run = start_run, end_run
    module.log_params = lambda params: calls.append(("log_params", dict(params)))
    module.log_metrics = lambda metrics, step=None: calls.append(("log_metrics", dict(metrics), step))
    return module


@pytest.mark.slow
def test_hooks_are_called_in_order_with_each_epochs_results(tiny_synthetic, tmp_path, monkeypatch):
    """Before: no hook could be given to a run (Trainer took one `on_epoch` callable, which saw the validation
    metrics alone); the MLflow logger did not exist."""
    logged = []
    monkeypatch.setitem(sys.modules, "mlflow", fake_mlflow(logged))
    calls = []
    trainer = Trainer(tiny_config(tiny_synthetic, tmp_path), CPU, verbose=False, hooks=[Recorder("a", calls)])
    trainer.add_hook(Recorder("b", calls))
    trainer.add_hook(MLflowLogger())
    assert [type(h) for h in trainer.hooks] == [EarlyStopping, PlotResults, Recorder, Recorder, MLflowLogger]
    result = trainer.fit()

    assert [c[:2] for c in calls] == [("a", "before_train"), ("b", "before_train"), ("a", 0), ("b", 0), ("a", 1),
                                      ("b", 1), ("a", "after_train"), ("b", "after_train")]  # fmt: skip
    assert calls[-1][2] is result and calls[-2][2] is result
    rows = read_results(result.run_dir / "results.csv")
    for epoch, (_, _, metrics) in enumerate(c for c in calls if c[0] == "a" and isinstance(c[1], int)):
        assert set(metrics) == set(rows) - {"epoch"}  # the epoch's results.csv values, every column
        for name, value in metrics.items():
            assert value == pytest.approx(rows[name][epoch], rel=1e-5, nan_ok=True), name

    # the MLflow logger: one run, the settings, each epoch's metrics at its step, the final metrics
    assert logged[0] == ("start_run", "run") and logged[-1] == ("end_run", "FINISHED")
    assert logged[1][0] == "log_params" and logged[1][1]["epochs"] == 2 and logged[1][1]["imgsz"] == 64
    per_epoch = [entry for entry in logged if entry[0] == "log_metrics" and entry[2] is not None]
    assert [step for _, _, step in per_epoch] == [0, 1]
    for epoch, (_, metrics, _) in enumerate(per_epoch):
        finite = {k for k in rows if k != "epoch" and not math.isnan(rows[k][epoch])}
        assert set(metrics) == finite
        assert metrics["train/box_loss"] == pytest.approx(rows["train/box_loss"][epoch], rel=1e-5)
    final = [entry[1] for entry in logged if entry[0] == "log_metrics" and entry[2] is None]
    assert final == [{f"final/{k}": v for k, v in result.final_metrics.items()}]


@pytest.mark.slow
def test_a_hook_stops_the_run_after_its_epoch(tiny_synthetic, tmp_path):
    """A custom stop rule, given to `train(hooks=...)`: 1 of 3 epochs, and the run ends as a finished one (with
    --nosave: last.pt and best.pt written once the epochs end). Before: impossible without editing the trainer."""
    calls = []
    cfg = tiny_config(tiny_synthetic, tmp_path, epochs=3, save=False)
    result = train(cfg, CPU, verbose=False, hooks=[StopAfter(0), Recorder("r", calls)])
    assert result.epochs_run == 1 and read_results(result.run_dir / "results.csv")["epoch"] == [0.0]
    assert [c[1] for c in calls] == ["before_train", 0, "after_train"]  # the stopping epoch seen by every hook
    for path in (result.last, result.best):
        ckpt = load_checkpoint(path)
        assert ckpt.state["epoch"] == 0 and "optimizer" not in ckpt.state  # finished: stripped


def old_stop_epoch(scores: list[float], patience: int, *, start_epoch: int = 0, best_epoch: int = -1,
                   best_fitness: float = 0.0) -> int | None:  # fmt: skip
    """The trainer's rule before hooks: the epoch after which it stopped early, or None."""
    progress = TrainProgress(start_epoch=start_epoch, best_fitness=best_fitness, best_epoch=best_epoch)
    without_gain = progress.epochs_without_gain
    for epoch in range(start_epoch, len(scores)):
        first = progress.best_epoch < 0 and progress.best_fitness <= 0
        if scores[epoch] > progress.best_fitness or first:
            progress.best_fitness, progress.best_epoch, without_gain = scores[epoch], epoch, 0
        else:
            without_gain += 1
        if patience > 0 and without_gain >= patience:
            return epoch
    return None


def hook_stop_epoch(scores: list[float], patience: int, **resumed) -> int | None:
    progress = TrainProgress(**resumed)
    trainer = SimpleNamespace(cfg=SimpleNamespace(patience=patience), progress=progress)
    hook = EarlyStopping()
    hook.before_train(trainer)
    for epoch in range(progress.start_epoch, len(scores)):
        progress.record(epoch, scores[epoch])
        if hook.after_epoch(trainer, epoch, {}):
            return epoch
    return None


def test_early_stopping_hook_stops_where_the_trainer_stopped():
    """Fresh and resumed runs (a legacy checkpoint without best_epoch too), random fitness curves: the hook stops
    after the same epoch as the trainer's former inline rule."""
    rng = random.Random(0)
    for _ in range(300):
        scores = [round(rng.random(), 1) for _ in range(12)]
        patience = rng.choice([0, 1, 2, 3, 5])
        start = rng.randrange(0, 6)
        resumed = dict(start_epoch=start, best_epoch=rng.randrange(-1, start) if start else -1,
                       best_fitness=rng.choice([0.0, 0.5]))  # fmt: skip
        for case in ({}, resumed):
            assert hook_stop_epoch(scores, patience, **case) == old_stop_epoch(scores, patience, **case), case
    assert hook_stop_epoch([0.5, 0.4, 0.6, 0.3, 0.2, 0.9], 2) == 4  # an oracle by hand


class ScriptedTrainer(Trainer):
    """Validation returns the scripted fitness of each epoch (mAP50 = mAP50-95 = fitness)."""

    FITNESS = (0.6, 0.4, 0.3, 0.9)

    def validate(self):
        value = self.FITNESS[len(self.fitness_seen)]
        self.fitness_seen.append(value)
        return {"metrics/mAP50": value, "metrics/mAP50-95": value}


@pytest.mark.slow
def test_early_stopping_stops_a_run_after_patience_epochs_without_gain(tiny_synthetic, tmp_path):
    """--patience 2 over fitness 0.6 0.4 0.3 (0.9), as before hooks: the run stops after epoch 2 (3 of 4 epochs),
    best.pt from epoch 0."""
    ScriptedTrainer.fitness_seen = []
    result = ScriptedTrainer(tiny_config(tiny_synthetic, tmp_path, epochs=4, patience=2), CPU, verbose=False).fit()
    assert result.epochs_run == 3 and read_results(result.run_dir / "results.csv")["epoch"] == [0, 1, 2]
    assert load_checkpoint(result.best).state["epoch"] == 0 and result.best_fitness == pytest.approx(0.6)


def test_mlflow_logger_without_mlflow_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    with pytest.raises(MissingExtraError, match="^MLflowLogger needs the mlflow package, which is not installed"):
        MLflowLogger()


def test_a_hook_that_is_not_a_train_hook_is_refused_before_anything_is_built(tmp_path):
    with pytest.raises(InputError, match="is not a TrainHook"):
        Trainer(TrainConfig(project=str(tmp_path)), CPU, hooks=[lambda trainer: None])
    assert not list(tmp_path.iterdir())


def test_a_search_trial_reports_its_best_epoch_after_each_epoch():
    """The search's reporting is a hook now (before: the trainer's `on_epoch` callable)."""
    reports = []
    hook = ReportToTune(reports.append)
    for epoch, (map50, map50_95) in enumerate([(0.5, 0.3), (0.4, 0.2)]):
        hook.after_epoch(None, epoch, {"metrics/mAP50": map50, "metrics/mAP50-95": map50_95})
    assert [(r["epoch"], r["mAP50"]) for r in reports] == [(1, 0.5), (2, 0.5)]  # epoch 2 reports epoch 1's best

"""The interface of a training hook: what `Trainer.fit` calls, when, on which ranks, and how a hook stops a run."""

from __future__ import annotations

from typing import Any, ClassVar


class TrainHook:
    """Code run by `Trainer.fit` at three points of a run; subclass it and override the methods you need (each is
    a no-op here). `trainer` is the `Trainer` (its `cfg`, `run_dir`, `progress`, `model`, `optim`, ...).

    - `before_train(trainer)`: once, when `fit()` starts, before the first epoch (also on a resume).
    - `after_epoch(trainer, epoch, metrics)`: after each epoch (from 0) is validated, logged and its checkpoints
      saved; `metrics` are the epoch's results.csv values (`train/*_loss`, `metrics/*`, `val/*_loss`, `lr/pg*`,
      `time/epoch_s`). Returning True stops the run after this epoch: the run then ends as one that trained all
      its epochs (best.pt validated, `after_train`, last.pt stripped). Every hook sees every epoch, the stopping
      one included.
    - `after_train(trainer, result)`: once, at the run's end: after the final validation of best.pt and before
      last.pt is stripped (the run's last act), with the `TrainResult`; with None when the run ends earlier by
      an exception (Ctrl-C, a failure, a hook's `before_train` or `after_epoch` that raised), once the process
      group is gone. It is called once either way: an exception of an `after_train` ends the run there.

    Order: the trainer's own hooks first (`builtin.EarlyStopping`, then `builtin.PlotResults`), then the ones
    given as `Trainer(hooks=[...])` / `train(hooks=[...])`, then those of `trainer.add_hook(hook)`, each method
    called on every hook in that order. Ranks: under torchrun a hook runs on rank 0 alone (where the metrics
    are) unless its class sets `all_ranks = True`; on the other ranks `metrics` is empty and the return value of
    `after_epoch` is ignored: the decision to stop is rank 0's, sent to every rank. An exception raised by a hook
    ends the run there (as Ctrl-C would: last.pt keeps the optimiser state, so that a resume goes on).
    """

    all_ranks: ClassVar[bool] = False

    def before_train(self, trainer: Any) -> None:
        """Called once when the run starts."""

    def after_epoch(self, trainer: Any, epoch: int, metrics: dict[str, float]) -> bool | None:
        """Called after each epoch; True stops the run after it."""
        return None

    def after_train(self, trainer: Any, result: Any) -> None:
        """Called once at the run's end (`result` None when it ended by an exception)."""

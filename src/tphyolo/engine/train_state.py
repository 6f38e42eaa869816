"""A run's resumable state: what a training checkpoint holds beyond the weights, and restoring it.

`training_checkpoint` writes the payload of `last.pt` / `best.pt` (the keys of `tphyolo.checkpoint`);
`restore_training` loads one into a freshly built `Optimization` and returns where the run stands.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch import nn

from tphyolo.checkpoint import Checkpoint
from tphyolo.engine.ema import unwrap
from tphyolo.engine.rng import rng_state, set_rng_state
from tphyolo.engine.train_config import TrainConfig
from tphyolo.engine.train_loop import StepState
from tphyolo.engine.train_optim import Optimization


@dataclass
class TrainProgress:
    """Where a run stands: the next epoch to train, the best fitness so far, and the step counters."""

    start_epoch: int = 0
    best_fitness: float = 0.0
    steps: StepState = field(default_factory=StepState)


def restore_training(ckpt: Checkpoint, optim: Optimization, *, epochs: int, restore_rng: bool) -> TrainProgress:
    """Load `ckpt`'s optimiser, scheduler, scaler and EMA states into `optim` and, when `restore_rng` (rank 0),
    the RNG states into the process; returns the progress to continue from. Raises ValueError when the run
    already trained its `epochs`."""
    state = ckpt.state
    optim.optimizer.load_state_dict(state["optimizer"])
    if state.get("scheduler"):
        optim.scheduler.load_state_dict(state["scheduler"])
    if state.get("scaler"):
        optim.scaler.load_state_dict(state["scaler"])
    if optim.ema is not None and ckpt.ema is not None:
        optim.ema.ema.load_state_dict(ckpt.ema)
        optim.ema.updates = int(state.get("ema_updates", 0))
    counters = state.get("train_args", {}).get("_progress", {})
    progress = TrainProgress(
        start_epoch=int(state["epoch"]) + 1,
        best_fitness=float(state.get("best_fitness", 0.0)),
        steps=StepState(step=int(counters.get("step", 0)), last_opt_step=int(counters.get("last_opt_step", -1))),
    )
    if state.get("rng_state") and restore_rng:
        set_rng_state(state["rng_state"])
    if progress.start_epoch >= epochs:
        raise ValueError(f"{ckpt.path}: the run already finished its {epochs} epochs; nothing to resume")
    return progress


def training_checkpoint(
    model: nn.Module, optim: Optimization, *, cfg: TrainConfig, epoch: int, progress: TrainProgress
) -> dict[str, Any]:
    """The checkpoint payload after `epoch`: weights, EMA, model yaml and names, optimiser/scheduler/scaler
    states, the run's settings with its step counters (`train_args`, which `Trainer.resume` reads) and the
    process RNG states."""
    model = unwrap(model)
    return {
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "ema": {k: v.detach().cpu() for k, v in optim.ema.ema.state_dict().items()},
        "model_yaml": model.yaml,
        "names": list(model.names),
        "nc": model.nc,
        "optimizer": optim.optimizer.state_dict(),
        "scheduler": optim.scheduler.state_dict(),
        "scaler": optim.scaler.state_dict(),
        "epoch": epoch,
        "best_fitness": progress.best_fitness,
        "ema_updates": optim.ema.updates,
        "train_args": {
            **cfg.to_dict(),
            "_progress": {"step": progress.steps.step, "last_opt_step": progress.steps.last_opt_step},
        },
        "rng_state": rng_state(),
    }


def resume_config(path: Path, ckpt: Checkpoint) -> TrainConfig:
    """The settings of the run whose `weights/last.pt` is `path`, writing into that same run folder."""
    args = ckpt.state.get("train_args")
    if not args:
        raise ValueError(f"{path}: not a resumable training checkpoint (it has no train_args)")
    run_dir = path.resolve().parent.parent
    return replace(TrainConfig.from_dict(args), project=str(run_dir.parent), name=run_dir.name, exist_ok=True)

"""A run's resumable state: what a training checkpoint holds beyond the weights, and restoring it.

`training_checkpoint` writes the payload of `last.pt` / `best.pt` (the keys of `tphyolo.checkpoint.format`);
`restore_training` checks one's resume entries and loads them into a freshly built `Optimization`, returning
where the run stands; `restore_gradients` puts back the gradients accumulated towards an optimiser step that
the epoch's end had not reached yet. A resumed run thus continues as the uninterrupted run would have (with
the data of each epoch drawn from the seed and the epoch, `tphyolo.data.sampler`), in the layout and autocast
its checkpoint ran with (`training_runtime`: decided once, `tphyolo.runtime.decisions`). A malformed entry stops the
resume with a CheckpointError naming the file and the entry, except those a run can do without, which are
reset with a warning (an unreadable RNG state, a non-finite best fitness).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tphyolo.checkpoint.format import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    remove_stale_temp_files,
    save_checkpoint,
)
from tphyolo.errors import InputError
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.decisions import Decision, decide_runtime
from tphyolo.training.config import TrainConfig
from tphyolo.training.loop import StepState
from tphyolo.training.optim.ema import unwrap
from tphyolo.training.optim.optimization import Optimization
from tphyolo.training.rng import rng_state, set_rng_state

RUNTIME_KEY = "_runtime"  # train_args: the layout and autocast a run trained with, which a resume keeps
AMPS = ("off", "bf16", "fp16")
LOGGER = logging.getLogger("tphyolo.train")


@dataclass
class TrainProgress:
    """Where a run stands: the next epoch to train, the best fitness so far (reached at `best_epoch`, -1 for
    none yet), and the step counters."""

    start_epoch: int = 0
    best_fitness: float = 0.0
    best_epoch: int = -1
    steps: StepState = field(default_factory=StepState)

    @property
    def epochs_without_gain(self) -> int:
        """The epochs trained since the best one: what `--patience` counts."""
        return self.start_epoch - 1 - self.best_epoch if self.best_epoch >= 0 else 0

    def record(self, epoch: int, score: float | None) -> bool:
        """Whether `epoch`, of fitness `score` (None without validation), is the best one so far, which it then
        becomes: the first epoch always is (best.pt is always written), and without validation the latest is."""
        first = self.best_epoch < 0 and self.best_fitness <= 0
        improved = score is None or score > self.best_fitness or first
        if improved:
            self.best_fitness, self.best_epoch = (0.0 if score is None else score), epoch
        return improved

    def trained_out(self, *, epochs: int, patience: int) -> bool:
        """Whether no epoch is left to train: all `epochs` trained, or `patience` (> 0) epochs without gain."""
        return self.start_epoch >= epochs or 0 < patience <= self.epochs_without_gain


def _integer(ckpt: Checkpoint, where: str, value: Any, *, minimum: int) -> int:
    if type(value) is not int or value < minimum:
        raise CheckpointError(f"{ckpt.path}: resume state {where} must be an integer >= {minimum}, got {value!r:.60}")
    return value


def _load_state(ckpt: Checkpoint, key: str, target: Any) -> None:
    """`target.load_state_dict(ckpt.state[key])`, its failure named by file and entry."""
    try:
        target.load_state_dict(ckpt.state[key])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as error:
        raise CheckpointError(f"{ckpt.path}: resume state '{key}' does not fit this run: {error}") from error


def read_progress(ckpt: Checkpoint) -> TrainProgress:
    """Where the run of `ckpt` stands, checked: `epoch` an integer >= 0, the step counters integers, a
    non-finite or non-numeric `best_fitness` reset to 0 with a warning (so that best.pt is written again)."""
    state = ckpt.state
    if "epoch" not in state:
        raise CheckpointError(f"{ckpt.path}: not a resumable training checkpoint (it has no 'epoch')")
    epoch = _integer(ckpt, "'epoch'", state["epoch"], minimum=0)
    counters = state.get("train_args", {}).get("_progress", {})
    if not isinstance(counters, dict):
        raise CheckpointError(f"{ckpt.path}: resume state train_args._progress must be a dict, got {counters!r:.60}")
    best = state.get("best_fitness", 0.0)
    if type(best) not in (int, float) or not math.isfinite(best):
        LOGGER.warning("%s: best_fitness %r is not a finite number; starting from 0", ckpt.path, best)
        best = 0.0
    return TrainProgress(
        start_epoch=epoch + 1,
        best_fitness=float(best),
        best_epoch=_integer(ckpt, "_progress.best_epoch", counters.get("best_epoch", -1), minimum=-1),
        steps=StepState(
            step=_integer(ckpt, "_progress.step", counters.get("step", 0), minimum=0),
            last_opt_step=_integer(ckpt, "_progress.last_opt_step", counters.get("last_opt_step", -1), minimum=-1),
            nonfinite_in_a_row=_integer(
                ckpt, "_progress.nonfinite_in_a_row", counters.get("nonfinite_in_a_row", 0), minimum=0
            ),
        ),
    )


def run_finished(ckpt: Checkpoint, progress: TrainProgress, *, epochs: int, patience: int) -> bool:
    """Whether the run whose `last.pt` is `ckpt` finished: all its epochs trained (`TrainProgress.trained_out`)
    and `last.pt` stripped for release, which is a run's last act, after best.pt, the final validation and the
    plots. A run stopped before that keeps the optimiser state in `last.pt`, and a resume finishes it."""
    return "optimizer" not in ckpt.state and progress.trained_out(epochs=epochs, patience=patience)


def restore_training(
    ckpt: Checkpoint, optim: Optimization, *, epochs: int, restore_rng: bool, patience: int = 0
) -> TrainProgress:
    """Load `ckpt`'s optimiser, scheduler, scaler and EMA states into `optim` and, when `restore_rng` (rank 0),
    the RNG states into the process; returns the progress to continue from (all epochs may be trained:
    `trained_out`, the run then has only its end left). Raises CheckpointError (naming the file and entry) on
    a missing or malformed entry, InputError when the run finished (`run_finished`). `patience`: the run's
    early stopping (0: none)."""
    state = ckpt.state
    progress = read_progress(ckpt)
    if run_finished(ckpt, progress, epochs=epochs, patience=patience):
        trained = f"its {epochs} epochs"
        if progress.start_epoch < epochs:
            trained = f"after {progress.start_epoch} of its {epochs} epochs (stopped early)"
        raise InputError(f"{ckpt.path}: the run already finished {trained}; nothing to resume")
    if "optimizer" not in state:
        raise CheckpointError(f"{ckpt.path}: not a resumable training checkpoint (it has no 'optimizer' state)")
    _load_state(ckpt, "optimizer", optim.optimizer)
    if state.get("scheduler"):
        _load_state(ckpt, "scheduler", optim.scheduler)
    if state.get("scaler"):
        _load_state(ckpt, "scaler", optim.scaler)
    if optim.ema is not None and ckpt.ema is not None:
        try:
            optim.ema.ema.load_state_dict(ckpt.ema)
        except RuntimeError as error:
            raise CheckpointError(f"{ckpt.path}: 'ema' weights do not fit the model: {error}") from error
        optim.ema.updates = _integer(ckpt, "'ema_updates'", state.get("ema_updates", 0), minimum=0)
    if state.get("rng_state") is not None and restore_rng:
        try:
            set_rng_state(state["rng_state"])
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as error:
            LOGGER.warning("%s: rng_state unreadable (%s); random streams continue unrestored", ckpt.path, error)
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
            "_progress": {
                "step": progress.steps.step,
                "last_opt_step": progress.steps.last_opt_step,
                "nonfinite_in_a_row": progress.steps.nonfinite_in_a_row,
                "best_epoch": progress.best_epoch,
            },
        },
        "rng_state": rng_state(),
        "pending_gradients": pending_gradients(model),
    }


def pending_gradients(model: nn.Module) -> dict[str, torch.Tensor]:
    """The gradients accumulated since the last optimiser step, by parameter name, on the CPU (empty when it
    stepped on the last batch: a step clears them)."""
    parameters = unwrap(model).named_parameters()
    return {name: p.grad.detach().cpu().clone() for name, p in parameters if p.grad is not None}


def restore_gradients(ckpt: Checkpoint, model: nn.Module) -> None:
    """Put `ckpt`'s pending gradients (`pending_gradients`) back on `model`'s parameters, so that the first
    optimiser step of the resumed epoch sums the batches the uninterrupted run's did. Raises CheckpointError
    naming the file when one does not fit the model."""
    saved = ckpt.state.get("pending_gradients") or {}
    if not isinstance(saved, Mapping):
        raise CheckpointError(f"{ckpt.path}: resume state 'pending_gradients' must be a dict, got {saved!r:.60}")
    parameters = dict(unwrap(model).named_parameters())
    for name, grad in saved.items():
        parameter = parameters.get(name)
        if parameter is None or not isinstance(grad, torch.Tensor) or grad.shape != parameter.shape:
            raise CheckpointError(
                f"{ckpt.path}: resume state 'pending_gradients' entry {name!r} does not fit the model"
            )
        parameter.grad = grad.to(parameter.device, parameter.dtype)


def epoch_checkpoints(epoch: int, *, improved: bool, save_period: int) -> list[str]:
    """The files (in `weights/`) that `epoch` writes, in order: `last.pt`, which commits the epoch, then
    `best.pt` when it improved the fitness and `epochN.pt` (N = epoch + 1) every `save_period` epochs."""
    names = ["last.pt"]
    if improved:
        names.append("best.pt")
    if save_period > 0 and (epoch + 1) % save_period == 0:
        names.append(f"epoch{epoch + 1}.pt")
    return names


def reconcile_weights(weights_dir: Path, ckpt: Checkpoint, progress: TrainProgress, *, save_period: int) -> None:
    """Make the weights folder of a resumed run agree with its `last.pt` (`ckpt`, read into `progress`): remove
    the temporary files of an interrupted save, and write from `last.pt` each other file of its epoch
    (`epoch_checkpoints`: best.pt, epochN.pt) that does not hold that epoch (the run stopped in between). A
    best.pt missing from an earlier best epoch (`--nosave` holds it in memory until the end) is written from
    `last.pt` too, with a warning: its weights are lost."""
    for path in remove_stale_temp_files(weights_dir):
        LOGGER.warning("removed %s, left by an interrupted checkpoint save", path)
    epoch = progress.start_epoch - 1
    for name in epoch_checkpoints(epoch, improved=progress.best_epoch == epoch, save_period=save_period)[1:]:
        path = weights_dir / name
        try:
            if load_checkpoint(path).state.get("epoch") == epoch:
                continue
        except (FileNotFoundError, CheckpointError):
            pass
        LOGGER.warning("%s does not hold epoch %d, which %s committed: written from it", path, epoch, ckpt.path)
        save_checkpoint(path, ckpt.payload())
    best = weights_dir / "best.pt"
    if not best.exists():
        LOGGER.warning("%s is missing and the weights of the best epoch (%d) with it: written from %s (epoch %d)",
                       best, progress.best_epoch, ckpt.path, epoch)  # fmt: skip
        save_checkpoint(best, ckpt.payload())


# what a finished run's files no longer need
RELEASE_DROPPED = ("optimizer", "scheduler", "scaler", "rng_state", "pending_gradients")


def release_payload(payload: dict[str, Any], *, copy: bool = False) -> dict[str, Any]:
    """A checkpoint payload without what only a resume needs (`RELEASE_DROPPED`), its EMA weights (what
    inference loads) as its model weights; epoch, fitness and settings stay. `copy`: tensors are cloned, so
    that the result does not follow later training steps."""
    out = {k: v for k, v in payload.items() if k not in RELEASE_DROPPED and k != "ema"}
    weights = payload.get("ema") or payload["model"]
    out["model"] = {k: v.clone() for k, v in weights.items()} if copy else weights
    return out


def strip_for_release(path: Path) -> tuple[int, int]:
    """Rewrite the checkpoint `path` of a finished run as `release_payload`. Returns the file's size in bytes
    before and after. A file already stripped is left as it is."""
    before = path.stat().st_size
    ckpt = load_checkpoint(path)
    if ckpt.ema is None and not any(key in ckpt.state for key in RELEASE_DROPPED):
        return before, before
    save_checkpoint(path, release_payload(ckpt.payload()))
    return before, path.stat().st_size


PATH_SETTINGS = ("data", "datasets_dir", "model", "hyp", "weights")  # settings that may name files


def with_resolved_paths(cfg: TrainConfig, base: Path) -> TrainConfig:
    """`cfg` with each relative path setting that names an existing file or folder under `base` made absolute
    (built-in names such as 'synthetic' stay as they are unless `base` holds such a file)."""
    changes = {}
    for name in PATH_SETTINGS:
        value = getattr(cfg, name)
        if value and not Path(value).expanduser().is_absolute() and (base / value).exists():
            changes[name] = str((base / value).resolve())
    return replace(cfg, **changes)


def resume_config(path: Path, ckpt: Checkpoint) -> TrainConfig:
    """The settings of the run whose `weights/last.pt` is `path`, writing into that same run folder.

    Paths are stored resolved; a relative one (older checkpoints) is resolved against the folder the run was
    started from (the run folder less its relative `project`/`name`), so a resume works from any folder.
    Raises CheckpointError naming `path` when the saved settings are missing or invalid."""
    args = ckpt.state.get("train_args")
    if not args or not isinstance(args, dict):
        raise CheckpointError(f"{path}: not a resumable training checkpoint (it has no train_args)")
    try:
        cfg = TrainConfig.from_dict(args)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: invalid saved training settings (train_args): {error}") from error
    run_dir = path.resolve().parent.parent
    saved_run = Path(cfg.project) / cfg.name
    if not saved_run.is_absolute() and len(run_dir.parts) > len(saved_run.parts):
        cfg = with_resolved_paths(cfg, run_dir.parents[len(saved_run.parts) - 1])
    return replace(cfg, project=str(run_dir.parent), name=run_dir.name, exist_ok=True)




def training_runtime(
    runtime: RuntimeConfig, device: torch.device, *, architecture: str, resumed: dict[str, Any] | None, source: str
) -> tuple[RuntimeConfig, dict[str, Decision]]:
    """`runtime` with the layout and autocast left automatic decided for training `architecture` on `device`, and
    the decisions ({"layout", "precision", "threads"}); `resumed`: the train_args of the checkpoint a run
    resumes (`source`, its path), whose RUNTIME_KEY, when valid, fills what the flags left automatic."""
    runtime_out, decisions = decide_runtime(runtime, device, mode="train", architecture=architecture)
    ran = (resumed or {}).get(RUNTIME_KEY)
    if isinstance(ran, dict) and type(ran.get("channels_last")) is bool and ran.get("amp") in AMPS:
        why = f"as {source} ran"
        if runtime.channels_last is None and not runtime.deterministic:
            runtime_out = replace(runtime_out, channels_last=ran["channels_last"])
            decisions["layout"] = Decision("NHWC" if ran["channels_last"] else "NCHW", "resumed", why)
        if runtime.amp == "auto" and not runtime.half and not runtime.deterministic:
            runtime_out = replace(runtime_out, amp=ran["amp"])
            decisions["precision"] = Decision("fp32" if ran["amp"] == "off" else ran["amp"], "resumed", why)
    threads = Decision(str(torch.get_num_threads()), "rule", "PyTorch's intra-op threads")
    return runtime_out, {**decisions, "threads": threads}


def ran_with(runtime: RuntimeConfig) -> dict[str, Any]:
    """What a checkpoint keeps under RUNTIME_KEY of a run on `runtime` (decided: no automatic setting left)."""
    return {"channels_last": bool(runtime.channels_last), "amp": runtime.amp}

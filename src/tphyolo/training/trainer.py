"""The training run: a `Trainer` built from a TrainConfig by small builders, then `fit()`: the epochs,
validation, checkpoints and logs.

`train(cfg, runtime)` is the Python API behind `tphyolo train`. One process trains on one device; under
torchrun every process runs the same code, rank 0 alone logs, validates and saves, and the others wait for it.
The parts are built by `training.data`, `training.model.setup`, `training.optim.optimization` and
`training.state`; the epoch itself is `training.loop.train_one_epoch`.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
import yaml

from tphyolo.checkpoint.format import load_checkpoint, save_checkpoint
from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.letterbox import check_imgsz
from tphyolo.data.loader import set_loader_epoch, step_size, stop_workers
from tphyolo.errors import InputError
from tphyolo.evaluation import loop as evaluation_loop  # by module: a patched loop function is the one called
from tphyolo.evaluation import results as evaluation_results  # likewise for the rendering
from tphyolo.evaluation.settings import EvalSettings
from tphyolo.evaluation.writers import BatchPlots, MetricPlots
from tphyolo.infer.config import InferenceConfig
from tphyolo.metrics import fitness
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.console import progress_output
from tphyolo.runtime.decisions import describe, write_decisions
from tphyolo.runtime.distributed import (
    DistContext,
    barrier,
    broadcast_module,
    broadcast_object,
    destroy_process_group,
    init_process_group,
)
from tphyolo.runtime.run_dir import new_run_dir, remove_if_empty
from tphyolo.training.config import TrainConfig
from tphyolo.training.data import build_data, grid_stride, load_train_data_config
from tphyolo.training.hooks.base import TrainHook
from tphyolo.training.hooks.builtin import EarlyStopping, PlotResults
from tphyolo.training.hyp import scale_hyp, train_hyp
from tphyolo.training.log import EpochBar, TrainLog
from tphyolo.training.loop import LOSS_NAMES, EpochHooks, EpochPlace, train_one_epoch
from tphyolo.training.loss import YoloLoss
from tphyolo.training.model.setup import (
    build_model_for_training,
    check_freeze,
    prepare_model_for_training,
    wrap_for_training,
)
from tphyolo.training.optim.optimization import build_optimization, warmup_note, warmup_plan, warn_if_few_steps
from tphyolo.training.plots import plot_batch
from tphyolo.training.recipes import fit_nominal_batch, resolve_recipe
from tphyolo.training.rng import seed_everything
from tphyolo.training.run_end import plot_train_labels, strip, validate_as_val
from tphyolo.training.startup import StartupClock
from tphyolo.training.state import (
    RUNTIME_KEY,
    TrainProgress,
    epoch_checkpoints,
    ran_with,
    reconcile_weights,
    release_payload,
    restore_gradients,
    restore_training,
    resume_config,
    training_checkpoint,
    training_runtime,
    with_resolved_paths,
)
from tphyolo.training.val_loss import ValLoss

LOGGER = logging.getLogger("tphyolo.train")
SINGLE_CLASS_NAMES = ("item",)  # --single-cls
METRIC_COLUMNS = ("metrics/precision", "metrics/recall", "metrics/mAP50", "metrics/mAP50-95")
VALIDATION_COLUMNS = (*METRIC_COLUMNS, *(f"val/{name}_loss" for name in LOSS_NAMES))  # nan under --noval


@dataclass
class TrainResult:
    """What a finished run produced."""

    run_dir: Path
    last: Path
    best: Path
    epochs_run: int
    best_fitness: float
    final_metrics: dict[str, float] = field(default_factory=dict)


class Trainer:
    """One training run: building it prepares everything (run folder, data, model, optimisation, state
    restored when resuming); `fit()` trains.

    Parts: `run_dir`; `data` (TrainData: sets, loaders, imgsz); `model` (the plain module on `device`, which
    is saved); `train_model` (what the loop calls: `model` in DDP and/or compiled); `hyp` (scaled to the model);
    `loss_fn`; `optim` (Optimization: optimiser, scheduler, scaler, EMA, accumulation, warm-up); `progress`
    (TrainProgress: start epoch, best fitness, step counters).
    verbose: False hides the progress bars (log records go where the process's logging sends them).
    hooks: `TrainHook`s run after the trainer's own (early stopping, results.png), in order; `add_hook` adds one
    more (`training.hooks.base` states when each method is called, on which ranks, and how one stops the run).
    Resuming: `Trainer.resume(path, runtime)` restores model, EMA, optimiser, scaler, scheduler, epoch, step
    counters and RNG state from a `last.pt`, and continues the same run folder (a run stopped after its last
    epoch does the end of `fit()` alone).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        runtime: RuntimeConfig,
        *,
        resume_from: str | Path | None = None,
        verbose: bool = True,
        hooks: Sequence[TrainHook] = (),
    ) -> None:
        if runtime.half:
            raise InputError("half (fp16 weights) is for inference only; train with amp (bf16/fp16 autocast)")
        self.startup = clock = StartupClock()  # imports: the process's start up to here
        if resume_from is None:
            cfg = with_resolved_paths(cfg, Path.cwd())
        self.cfg, self.runtime, self.verbose = cfg, runtime, verbose
        self.hooks: list[TrainHook] = [EarlyStopping(), PlotResults()]
        for hook in hooks:
            self.add_hook(hook)
        self._best_payload: dict[str, Any] | None = None  # --nosave: best.pt's contents until the end
        self._ema_copy: torch.nn.Module | None = None  # ranks other than 0: rank 0's EMA, for validation
        self.dist = dist = DistContext.from_env()
        self.device = device = runtime.torch_device(dist.local_rank)
        init_process_group(dist, device)
        seed_everything(cfg.seed + dist.rank)
        reused = cfg.exist_ok and (Path(cfg.project) / cfg.name).exists()
        run_dir = new_run_dir(cfg.project, cfg.name, exist_ok=cfg.exist_ok) if dist.is_main else None
        self.run_dir = Path(broadcast_object(dist, str(run_dir) if run_dir else None))
        (self.run_dir / "weights").mkdir(parents=True, exist_ok=True)
        clock.mark("setup")
        try:
            self._build(resume_from)
        except BaseException:
            if dist.is_main and not reused and remove_if_empty(self.run_dir):
                LOGGER.debug("removed the empty run folder %s", self.run_dir)
            raise

    def _build(self, resume_from: str | Path | None) -> None:
        cfg, runtime, dist, device, clock = self.cfg, self.runtime, self.dist, self.device, self.startup
        data_config = load_train_data_config(cfg.data, dist, datasets_dir=cfg.datasets_dir, scan_cache=cfg.scan_cache)
        cfg, recipe = resolve_recipe(cfg, data_config)
        clock.mark("data")
        resume = load_checkpoint(resume_from) if resume_from is not None else None
        names = SINGLE_CLASS_NAMES if cfg.single_cls else data_config.names
        model = build_model_for_training(cfg.model, names=names, resume=resume)
        check_freeze(model, cfg.freeze)
        hyp_raw = train_hyp(cfg.hyp, label_smoothing=cfg.label_smoothing)
        stride = grid_stride(model)
        imgsz = check_imgsz(cfg.imgsz, stride)
        self.hyp = scale_hyp(hyp_raw, num_levels=model.head.nl, num_classes=model.nc, imgsz=imgsz)
        clock.mark("model")
        self.data = build_data(cfg, data_config, hyp=self.hyp, imgsz=imgsz, stride=stride, dist=dist, device=device)
        clock.mark("data")
        cfg, recipe = fit_nominal_batch(cfg, recipe, batches_per_epoch=len(self.data.train_loader),
                                        world_size=dist.world_size, warmup_epochs=self.hyp["warmup_epochs"])
        if dist.is_main:  # the recipe line, once the nominal batch is fitted to the training set
            LOGGER.info("%s", recipe.describe(cfg, resumed=resume is not None))
        self.cfg = cfg
        resumed = (resume.state.get("train_args"), str(resume.path)) if resume is not None else (None, "")
        runtime, self.decisions = training_runtime(runtime, device, architecture=str(cfg.model), resumed=resumed[0],
                                                   source=resumed[1])  # decided once: `state.training_runtime`
        self.runtime = runtime
        if dist.is_main:
            LOGGER.info("training runs: %s", describe(self.decisions))
        self.model = prepare_model_for_training(
            model, cfg, train_set=self.data.train_set, imgsz=imgsz, anchor_t=self.hyp["anchor_t"],
            resumed=resume is not None, dist=dist, runtime=runtime, device=device,
        )  # fmt: skip
        clock.mark("model")
        self.optim = build_optimization(
            cfg, self.model, self.hyp, batches_per_epoch=len(self.data.train_loader), world_size=dist.world_size,
            with_ema=dist.is_main, runtime=runtime, device=device,
        )  # fmt: skip
        if dist.is_main:
            batches = len(self.data.train_loader)
            warn_if_few_steps(cfg, self.optim, batches_per_epoch=batches, world_size=dist.world_size)
        self.loss_fn = YoloLoss.from_model(self.model, self.hyp)
        self.progress = TrainProgress()
        if resume is not None:
            self.progress = restore_training(
                resume, self.optim, epochs=cfg.epochs, restore_rng=dist.rank == 0, patience=cfg.patience
            )
            restore_gradients(resume, self.model)
        clock.mark("optimiser")
        self.train_model = wrap_for_training(self.model, sync_bn=cfg.sync_bn, dist=dist, runtime=runtime, device=device)
        clock.mark("compile")
        if dist.is_main:
            if resume is not None:
                start = self.progress.start_epoch
                if self.progress.trained_out(epochs=cfg.epochs, patience=cfg.patience):
                    LOGGER.info("finishing %s: its epochs are trained (%d of %d); left: best.pt, the final validation "
                                "and plots, last.pt without the optimiser state", resume.path, start, cfg.epochs)
                else:
                    LOGGER.info("resuming %s from epoch %d of %d", resume.path, start + 1, cfg.epochs)
                save_period = cfg.save_period if cfg.save else 0  # --nosave writes no epochN.pt
                reconcile_weights(self.weights_dir, resume, self.progress, save_period=save_period)
            elif (self.weights_dir / "best.pt").exists():
                LOGGER.warning("%s: removing best.pt of an earlier run in this folder", self.weights_dir)
                (self.weights_dir / "best.pt").unlink()
            self._write_settings(hyp_raw)

    @classmethod
    def resume(
        cls, path: str | Path, runtime: RuntimeConfig, *, verbose: bool = True, hooks: Sequence[TrainHook] = ()
    ) -> Trainer:
        """A trainer that continues the run whose checkpoint is `path` (its train_args come from the file)."""
        path = Path(path)
        return cls(resume_config(path, load_checkpoint(path)), runtime, resume_from=path, verbose=verbose, hooks=hooks)

    def add_hook(self, hook: TrainHook) -> None:
        """Run `hook` after the hooks already added (`training.hooks.base.TrainHook` states the contract)."""
        if not isinstance(hook, TrainHook):
            raise InputError(f"hooks: {hook!r} is not a TrainHook; subclass tphyolo.training.TrainHook")
        self.hooks.append(hook)

    def _call_hooks(self, method: str, *args: Any) -> list[Any]:
        """The return values of `method` of every hook in order (on ranks other than 0: with `all_ranks`)."""
        return [getattr(hook, method)(self, *args) for hook in self.hooks if self.dist.is_main or hook.all_ranks]

    @property
    def weights_dir(self) -> Path:
        return self.run_dir / "weights"

    @property
    def names(self) -> list[str]:
        """The class names (index = class id)."""
        return list(self.model.names)

    def _write_settings(self, hyp_raw: dict[str, float]) -> None:
        """args.yaml, hyp.yaml (the file's values with the run's overrides) and, on a new run, labels.jpg."""
        settings = {**self.cfg.to_dict(), "runtime": asdict(self.runtime)}
        write_text_atomic(self.run_dir / "args.yaml", yaml.safe_dump(settings, sort_keys=False))
        write_text_atomic(self.run_dir / "hyp.yaml", yaml.safe_dump(hyp_raw, sort_keys=False))
        write_decisions(self.run_dir, {"train": self.decisions})
        if self.cfg.plots and self.progress.start_epoch == 0:
            plot_train_labels(self.data.train_set.records, self.names, self.run_dir / "labels.jpg")

    # ---------------------------------------------------------------------------------------------- the loop
    def fit(self) -> TrainResult:
        """Train for the configured epochs (or until early stopping); returns where the results are.

        The hooks (`self.hooks`) run when it starts, after each epoch (once its checkpoints are saved; one may stop
        the run, as early stopping does) and at its end. Then the run's end, in order: best.pt stripped for
        release, its final validation (table and figures), the hooks' `after_train` (results.png first), and
        last.pt stripped, the last act, which marks the run finished (`run_finished`). A run stopped before that
        has its optimiser state in last.pt: its resume trains no epoch and does the end."""
        cfg, dist, progress = self.cfg, self.dist, self.progress
        trained_out = progress.trained_out(epochs=cfg.epochs, patience=cfg.patience)  # a resume of the end alone
        log = None
        if dist.is_main:
            log = TrainLog(self.run_dir, start_epoch=progress.start_epoch)
        if dist.is_main and not trained_out:
            LOGGER.info(
                "training %s on %s for %d epochs, %d px, batch %d x %d process(es), accumulate %d, results in %s",
                cfg.model, cfg.data, cfg.epochs, self.data.imgsz, cfg.batch, dist.world_size, self.optim.accumulate,
                self.run_dir,
            )  # fmt: skip
            if progress.steps.step < self.optim.warmup_steps:
                batches = len(self.data.train_loader)
                LOGGER.info("%s", warmup_plan(self.optim.warmup_steps, batches, min_steps=cfg.warmup_min_steps,
                                              from_epochs=round(self.hyp["warmup_epochs"] * batches)))  # fmt: skip
        epoch = progress.start_epoch - 1
        best = self.weights_dir / "best.pt"
        ending = False  # the hooks' after_train has begun
        try:
            self._call_hooks("before_train")
            for epoch in range(progress.start_epoch, progress.start_epoch if trained_out else cfg.epochs):
                metrics = self._run_epoch(epoch, log)
                if dist.is_main:
                    score = fitness(metrics.get("metrics/mAP50", 0.0), metrics.get("metrics/mAP50-95", 0.0))
                    self._save(epoch, progress.record(epoch, score if cfg.val else None))
                stop = any(self._call_hooks("after_epoch", epoch, metrics))  # each hook called: a list, not a generator
                if broadcast_object(dist, stop):  # rank 0's decision
                    break
            if dist.is_main:
                if not cfg.save and epoch >= progress.start_epoch:
                    self._save(epoch, False, end=True)
                strip(best)
            barrier(dist)  # best.pt is written for good before every rank reads it
            for loader in (self.data.train_loader, self.data.val_loader):
                stop_workers(loader)  # before the compiled runtime starts its threads (`data.loader.stop_workers`)
            metrics = self._final_validation(best)
            result = TrainResult(run_dir=self.run_dir, last=self.weights_dir / "last.pt", best=best,
                                 epochs_run=epoch + 1 - progress.start_epoch, best_fitness=progress.best_fitness,
                                 final_metrics=metrics)  # fmt: skip
            ending = True
            self._call_hooks("after_train", result)
            if dist.is_main:
                strip(result.last)  # the last act: a stripped last.pt marks the run finished
        finally:
            if log is not None:
                log.close()
            destroy_process_group(dist)
            if not ending:
                self._call_hooks("after_train", None)  # an interrupted run's curves too
        return result

    def _final_validation(self, best: Path) -> dict[str, float]:
        """`best` validated as `tphyolo val` validates it (`run_end.validate_as_val`), its table logged with a row
        per class (rank 0); a --single-cls run, which `tphyolo val` cannot score the same way, by the training's
        own validation (with `plots`, the same figures)."""
        plots = self.cfg.plots and self.dist.is_main
        if self.cfg.single_cls:
            model = self.runtime.place_model(load_checkpoint(best).build_model(), self.device)
            figures = [BatchPlots(self.run_dir), MetricPlots(self.run_dir, conf=self.cfg.val_conf)]
            results = self._evaluate(model, writers=figures if plots else ())
        else:
            results = validate_as_val(best, self.cfg, runtime=self.runtime, device=self.device, plots=plots,
                                      run_dir=self.run_dir if self.dist.is_main else None, verbose=self.verbose)
        if self.dist.is_main:
            LOGGER.info("%s", evaluation_results.format_results(results, verbose=True))
        return self._metrics(results)

    def _run_epoch(self, epoch: int, log: Any) -> dict[str, float]:
        """Trains and validates `epoch`; its results.csv values (rank 0; empty on the others)."""
        cfg, dist, data, optim = self.cfg, self.dist, self.data, self.optim
        set_loader_epoch(data.train_loader, epoch)  # this epoch's order and augmentation, resumed or not
        multi_scale = None
        if cfg.multi_scale:
            multi_scale = lambda step: step_size(data.imgsz, seed=cfg.seed, step=step, stride=data.stride)  # noqa: E731
        bar = None
        if dist.is_main:
            bar = EpochBar(len(data.train_loader), epoch=epoch, epochs=cfg.epochs, device=self.device,
                           visible=self.verbose)  # fmt: skip

        on_batch = None
        if dist.is_main and cfg.plots and epoch == self.progress.start_epoch:

            def on_batch(i: int, batch: Any) -> None:
                if i < 3:
                    plot_batch(batch.images, batch.targets, self.names, self.run_dir / f"train_batch{i}.jpg")

        start = time.perf_counter()
        steps_before = self.progress.steps.step
        batches = data.train_loader
        if "first step" not in self.startup.phases and epoch == self.progress.start_epoch:
            report = partial(StartupClock.report, run_dir=self.run_dir if dist.is_main else None,
                             compiled=self.runtime.compile != "off")  # fmt: skip
            batches = self.startup.first_step(batches, report)
        mean_items = train_one_epoch(
            self.train_model, self.loss_fn, batches, optim, state=self.progress.steps, epoch=epoch, hyp=self.hyp,
            place=EpochPlace(self.runtime, self.device, dist), grad_clip=cfg.grad_clip,
            hooks=EpochHooks(multi_scale_size=multi_scale, progress=bar, on_batch=on_batch),
        )  # fmt: skip
        if bar is not None:
            bar.close()
        lrs = [group["lr"] for group in optim.optimizer.param_groups]
        optim.scheduler.step()
        seconds = time.perf_counter() - start
        metrics = self.validate() if cfg.val else dict.fromkeys(VALIDATION_COLUMNS, math.nan)  # every rank
        if not dist.is_main:
            barrier(dist)
            return {}
        values = {f"train/{name}_loss": float(v) for name, v in zip(LOSS_NAMES, mean_items.tolist(), strict=True)}
        values.update(metrics)
        values.update({f"lr/pg{i}": lr for i, lr in enumerate(lrs)})
        values["time/epoch_s"] = seconds
        log.log(epoch, values)
        LOGGER.info(
            "epoch %d/%d  loss %.4f %.4f %.4f  P %.3f R %.3f mAP50 %.3f mAP50-95 %.3f  %.1f img/s%s",
            epoch + 1, cfg.epochs, *mean_items.tolist(), metrics.get("metrics/precision", 0.0),
            metrics.get("metrics/recall", 0.0), metrics.get("metrics/mAP50", 0.0),
            metrics.get("metrics/mAP50-95", 0.0), len(data.train_set) / max(seconds, 1e-9),
            warmup_note(steps_before, self.progress.steps.step, optim.warmup_steps),
        )  # fmt: skip
        barrier(dist)
        return values

    def validate(self) -> dict[str, float]:
        """Validate the EMA model on the val split (--tile: sliced, as `predict --slice` runs): metrics and validation
        losses (`ValLoss`; nan when sliced), keyed as in results.csv. In a distributed run every rank calls this and
        validates its share of the batches with rank 0's EMA weights; the numbers are rank 0's (gathered there)."""
        tracker = ValLoss(model := self._validation_model(), self.loss_fn, sliced=self.data.val_slicing is not None)
        metrics = self._metrics(self._evaluate(model, tracker.batches(self.data.val_loader)))
        losses = tracker.mean(self.data.val_shard).tolist()
        return {**metrics, **{f"val/{name}_loss": v for name, v in zip(LOSS_NAMES, losses, strict=True)}}

    def _validation_model(self) -> torch.nn.Module:
        """The EMA model, rank 0's on every rank (the other ranks keep no average: they get a copy of it)."""
        if self.dist.is_main:
            model = self.optim.ema.ema
        else:
            if self._ema_copy is None:
                self._ema_copy = copy.deepcopy(self.model).eval().requires_grad_(False)
            model = self._ema_copy
        broadcast_module(self.dist, model)  # every rank takes part: rank 0 sends
        return model

    def _evaluate(self, model: torch.nn.Module, batches: Any = None, *, writers: Sequence[Any] = ()) -> Any:
        config = InferenceConfig(imgsz=self.data.imgsz, batch=2 * self.cfg.batch, conf=self.cfg.val_conf,
                                 iou=self.cfg.val_iou, max_det=self.cfg.max_det, merge=self.cfg.merge)  # fmt: skip
        batches = self.data.val_loader if batches is None else batches
        settings = EvalSettings(progress=self.verbose, shard=self.data.val_shard, slicing=self.data.val_slicing)
        return evaluation_loop.evaluate(model, batches, names=self.names, config=config, settings=settings,
                                        writers=writers, runtime=self.runtime, device=self.device)  # fmt: skip

    @staticmethod
    def _metrics(results: Any) -> dict[str, float]:
        values = (results.mp, results.mr, results.map50, results.map)
        return {name: float(v) for name, v in zip(METRIC_COLUMNS, values, strict=True)}

    def _save(self, epoch: int, improved: bool, *, end: bool = False) -> None:
        """The epoch's checkpoints (`epoch_checkpoints`): last.pt commits the epoch (its results.csv row is
        already written); should the run stop before the others are written, a resume writes them from it
        (`reconcile_weights`). With --nosave the epochs write nothing (the best one's weights are kept in memory):
        the `end` of the epochs (all trained, or a hook stopped the run) writes last.pt and best.pt."""
        payload = training_checkpoint(self.model, self.optim, cfg=self.cfg, epoch=epoch, progress=self.progress)
        payload["train_args"][RUNTIME_KEY] = ran_with(self.runtime)
        if end:
            for name, saved in (("last.pt", payload), ("best.pt", self._best_payload)):
                LOGGER.debug("saved %s", save_checkpoint(self.weights_dir / name, saved))
        elif not self.cfg.save:
            if improved:
                self._best_payload = release_payload(payload, copy=True)
        else:
            for name in epoch_checkpoints(epoch, improved=improved, save_period=self.cfg.save_period):
                LOGGER.debug("saved %s", save_checkpoint(self.weights_dir / name, payload))


def train(
    cfg: TrainConfig | None = None, runtime: RuntimeConfig | None = None, *, verbose: bool = True,
    hooks: Sequence[TrainHook] = (), **overrides: Any,
) -> TrainResult:  # fmt: skip
    """Train a model: `tphyolo.train(data="my.yaml", model="tph-yolov5s", epochs=65)`.

    Keyword overrides are TrainConfig fields; the result says where the weights and logs are. It reports
    progress as `tphyolo train` does (the recipe, one line per epoch, progress bars); `verbose=False` keeps
    it to warnings (`runtime.console.progress_output`). `hooks`: `TrainHook`s the run calls (`Trainer`).
    """
    cfg = replace(cfg or TrainConfig(), **overrides)
    with progress_output(verbose):
        return Trainer(cfg, runtime or RuntimeConfig(), verbose=verbose, hooks=hooks).fit()

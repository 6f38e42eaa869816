"""The training run: set-up from a TrainConfig, the epoch loop, validation, checkpoints and logs.

`train(cfg, runtime)` is the Python API behind `tphyolo train`. One process trains on one device; under
torchrun every process runs the same code, rank 0 alone logs, validates and saves, and the others wait for it.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from torch import nn

from tphyolo.engine.distributed import DistContext, barrier, broadcast_object, destroy_process_group, init_process_group
from tphyolo.engine.ema import ModelEMA, unwrap
from tphyolo.engine.optim import (
    accumulation_steps,
    apply_warmup,
    build_optimizer,
    lr_lambda,
    scaled_weight_decay,
    warmup_accumulation,
)
from tphyolo.engine.train_config import TrainConfig
from tphyolo.runtime import RuntimeConfig, autocast, sdpa_context

LOGGER = logging.getLogger("tphyolo.train")
MAX_NONFINITE_STEPS = 5
LOSS_NAMES = ("box", "obj", "cls")


class NonFiniteLossError(RuntimeError):
    """Training stopped because the loss was NaN/inf for several steps in a row."""


@dataclass
class TrainResult:
    """What a finished run produced."""

    run_dir: Path
    last: Path
    best: Path | None
    epochs_run: int
    best_fitness: float
    final_metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class StepState:
    """Counters that survive across epochs (and resumes)."""

    step: int = 0  # batches seen since the start of training
    last_opt_step: int = -1
    nonfinite_in_a_row: int = 0


def fitness(metrics: dict[str, float]) -> float:
    """Model selection score: 0.1 * mAP50 + 0.9 * mAP50-95."""
    return 0.1 * metrics.get("metrics/mAP50", 0.0) + 0.9 * metrics.get("metrics/mAP50-95", 0.0)


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch RNG states as checkpoint-safe data."""
    np_state = np.random.get_state()
    state = {
        "python": list(random.getstate()[1]),
        "python_version": random.getstate()[0],
        "python_gauss": random.getstate()[2],
        "numpy": torch.from_numpy(np_state[1].copy()),
        "numpy_pos": int(np_state[2]),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate((state["python_version"], tuple(state["python"]), state["python_gauss"]))
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), state["numpy_pos"], 0, 0.0))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    """Seed the process RNGs (called by the run itself, never at import)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def wrap_ddp(model: nn.Module, *, device: torch.device, sync_bn: bool) -> nn.Module:
    """`model` in DistributedDataParallel, its BatchNorms synchronised across processes when `sync_bn`.

    DDP runs SyncBatchNorm on GPUs only: on CPU (gloo) `sync_bn` is refused with a warning, and each process
    keeps its own batch statistics. The converted model shares its parameters and buffers with `model`.
    """
    if sync_bn:
        if device.type == "cuda":
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        else:
            LOGGER.warning("--sync-bn needs CUDA devices (SyncBatchNorm is GPU-only); using per-process BatchNorm")
    return nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def train_one_epoch(
    model: nn.Module,
    loss_fn: nn.Module,
    loader: torch.utils.data.DataLoader,
    optimizer: torch.optim.Optimizer,
    *,
    scaler: torch.amp.GradScaler,
    ema: ModelEMA | None,
    state: StepState,
    epoch: int,
    epoch_factor: float,
    hyp: dict[str, float],
    accumulate: int,
    warmup_steps: int,
    runtime: RuntimeConfig,
    device: torch.device,
    dist_ctx: DistContext,
    grad_clip: float = 0.0,
    multi_scale_size: Any = None,
    progress: Any = None,
    on_batch: Any = None,
) -> torch.Tensor:
    """Train for one pass over `loader`; returns the mean loss items (box, obj, cls).

    `multi_scale_size(step) -> int | None` gives the long side for a batch (None keeps it); `on_batch(i, batch)`
    is called on rank 0 after each batch (plots); `progress(i, mean_items, batch)` updates a progress bar.
    """
    model.train()
    mean_items = torch.zeros(3, device=device)
    channels_last = torch.channels_last if runtime.channels_last else torch.contiguous_format
    for i, batch in enumerate(loader):
        step = state.step
        if step <= warmup_steps:
            accumulate_now = warmup_accumulation(step=step, warmup_steps=warmup_steps, accumulate=accumulate)
            apply_warmup(optimizer, step=step, warmup_steps=warmup_steps, epoch_factor=epoch_factor, hyp=hyp)
        else:
            accumulate_now = accumulate
        if multi_scale_size is not None:
            size = multi_scale_size(step)
            if size is not None:
                batch = batch.resized(size)
        batch = batch.to(device, non_blocking=True)
        images = (batch.images.float() / 255).contiguous(memory_format=channels_last)  # (B, 3, H, W) in [0, 1]
        with autocast(runtime, device), sdpa_context(runtime):
            preds = model(images)
        loss, items = loss_fn([p.float() for p in preds], batch.targets)
        if dist_ctx.distributed:
            loss = loss * dist_ctx.world_size  # DDP averages gradients over processes

        if not torch.isfinite(loss).all():
            state.nonfinite_in_a_row += 1
            LOGGER.warning("epoch %d batch %d: non-finite loss %s, step skipped", epoch, i, items.tolist())
            optimizer.zero_grad(set_to_none=True)
            if state.nonfinite_in_a_row >= MAX_NONFINITE_STEPS:
                raise NonFiniteLossError(
                    f"the loss was NaN/inf for {MAX_NONFINITE_STEPS} batches in a row (epoch {epoch}); lower lr0, "
                    "check the labels (tphyolo data check) or train without --amp fp16"
                )
            state.step += 1
            continue
        state.nonfinite_in_a_row = 0
        scaler.scale(loss).backward()

        if step - state.last_opt_step >= accumulate_now:
            if grad_clip > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            if ema is not None:
                ema.update(model)
            state.last_opt_step = step

        mean_items = (mean_items * i + items.detach()) / (i + 1)
        state.step += 1
        if progress is not None:
            progress(i, mean_items, batch)
        if on_batch is not None:
            on_batch(i, batch)
    return mean_items


class Trainer:
    """One training run. Build it with a TrainConfig and a RuntimeConfig, then call `fit()`.

    Resuming: `Trainer.resume(path, runtime)` restores model, EMA, optimiser, scaler, scheduler, epoch, step
    counters and RNG state from a `last.pt`, and continues the same run folder.
    """

    def __init__(self, cfg: TrainConfig, runtime: RuntimeConfig, *, resume_from: Path | None = None) -> None:
        self.cfg = cfg
        self.runtime = runtime
        self.dist = DistContext.from_env()
        self.device = runtime.torch_device(self.dist.local_rank)
        self.resume_from = resume_from
        self._ready = False

    @classmethod
    def resume(cls, path: str | Path, runtime: RuntimeConfig) -> Trainer:
        """A trainer that continues the run whose checkpoint is `path` (its train_args come from the file)."""
        from tphyolo.checkpoint import load_checkpoint

        path = Path(path)
        ckpt = load_checkpoint(path)
        args = ckpt.state.get("train_args")
        if not args:
            raise ValueError(f"{path}: not a resumable training checkpoint (it has no train_args)")
        run_dir = path.resolve().parent.parent
        cfg = replace(TrainConfig.from_dict(args), project=str(run_dir.parent), name=run_dir.name, exist_ok=True)
        return cls(cfg, runtime, resume_from=path)

    # ----------------------------------------------------------------------------------------------- set-up
    def setup(self) -> None:
        """Build data, model, optimiser and state (restored when resuming); `fit()` calls it when needed."""
        if self._ready:
            return
        self._ready = True
        from tphyolo.data.augment import Hyp
        from tphyolo.data.dataset_config import load_data_config
        from tphyolo.data.loader import build_dataloader, build_dataset
        from tphyolo.engine.hyp import load_hyp, scale_hyp
        from tphyolo.engine.loss import YoloLoss
        from tphyolo.engine.run_dir import new_run_dir
        from tphyolo.models import build_model

        cfg, dist_ctx = self.cfg, self.dist
        init_process_group(dist_ctx, self.device)
        seed_everything(cfg.seed + dist_ctx.rank)

        run_dir = new_run_dir(cfg.project, cfg.name, exist_ok=cfg.exist_ok) if dist_ctx.is_main else None
        self.run_dir = Path(broadcast_object(dist_ctx, str(run_dir) if run_dir else None))
        self.weights_dir = self.run_dir / "weights"
        self.weights_dir.mkdir(parents=True, exist_ok=True)

        # Data: rank 0 scans (and generates the synthetic set) first, so that the others read its caches.
        if dist_ctx.is_main:
            self.data = load_data_config(cfg.data)
        barrier(dist_ctx)
        if not dist_ctx.is_main:
            self.data = load_data_config(cfg.data)

        resume_ckpt = None
        if self.resume_from is not None:
            from tphyolo.checkpoint import load_checkpoint

            resume_ckpt = load_checkpoint(self.resume_from)

        # Model: a fresh one from the yaml, weights transferred from --weights, or the checkpoint being resumed.
        names = list(self.data.names)
        if resume_ckpt is not None:
            model = build_model(resume_ckpt.model_yaml)
            model.load_state_dict(resume_ckpt.model)
            names = resume_ckpt.names
        else:
            model = build_model(cfg.model, num_classes=len(names) or None, names=names or None)
        if not names:
            names = [str(i) for i in range(model.nc)]
        if len(names) != model.nc:
            raise ValueError(f"data {cfg.data!r} has {len(names)} classes but the model predicts {model.nc}")
        self.names = names

        hyp = load_hyp(cfg.hyp)
        if cfg.label_smoothing:
            hyp["label_smoothing"] = cfg.label_smoothing
        self.hyp_raw = dict(hyp)
        stride = int(model.stride.max())
        gs = max(stride, 32)
        imgsz = math.ceil(cfg.imgsz / gs) * gs
        if imgsz != cfg.imgsz:
            LOGGER.warning("--img %d is not a multiple of the max stride %d; using %d", cfg.imgsz, gs, imgsz)
        self.imgsz, self.gs = imgsz, gs
        self.hyp = scale_hyp(hyp, num_levels=model.head.nl, num_classes=model.nc, imgsz=imgsz)

        train_set, train_scan = build_dataset(
            self.data,
            "train",
            imgsz=imgsz,
            augment=True,
            hyp=Hyp.from_dict(self.hyp),
            rect=cfg.rect,
            batch_size=cfg.batch,
            stride=gs,
            ignore_mode=cfg.ignore_mode,
            cache=cfg.cache,
            seed=cfg.seed,
        )
        if len(train_set) == 0:
            raise ValueError(f"data {cfg.data!r}: no usable training images (run `tphyolo data check`)")
        self.train_set = train_set
        self.train_loader = build_dataloader(
            train_set,
            batch_size=cfg.batch,
            workers=cfg.workers,
            shuffle=not cfg.rect,
            seed=cfg.seed,
            persistent_workers=cfg.workers > 0,
            pin_memory=self.device.type == "cuda",
            distributed=dist_ctx.distributed,
            rank=dist_ctx.rank,
            world_size=dist_ctx.world_size,
        )
        if dist_ctx.is_main:
            val_set, _ = build_dataset(
                self.data, "val", imgsz=imgsz, augment=False, rect=True, batch_size=cfg.batch * 2, stride=gs
            )
            self.val_loader = build_dataloader(
                val_set, batch_size=cfg.batch * 2, workers=min(cfg.workers, 2), shuffle=False
            )

        if resume_ckpt is None:
            if cfg.weights:
                self._transfer(model, cfg.weights)
            if cfg.autoanchor:
                self._check_anchors(model, train_set)

        for name, param in model.named_parameters():
            layer = int(name.split(".")[1]) if name.startswith("model.") else -1
            param.requires_grad_(not (0 <= layer < cfg.freeze))

        model = model.to(self.device)
        if self.runtime.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.ema = ModelEMA(model) if dist_ctx.is_main else None
        self.model = model  # the plain module (EMA, saving)

        world = dist_ctx.world_size
        self.accumulate = accumulation_steps(cfg.batch, world, nominal_batch=cfg.nominal_batch)
        weight_decay = scaled_weight_decay(self.hyp["weight_decay"], cfg.batch, world, nominal_batch=cfg.nominal_batch)
        self.optimizer = build_optimizer(
            model, name=cfg.optimizer, lr=self.hyp["lr0"], momentum=self.hyp["momentum"], weight_decay=weight_decay
        )
        self.lf = lr_lambda(epochs=cfg.epochs, lrf=self.hyp["lrf"], cosine=cfg.cos_lr)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda=self.lf)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.runtime.needs_grad_scaler(self.device))
        self.loss_fn = YoloLoss.from_model(model, self.hyp)

        self.start_epoch, self.best_fitness, self.state = 0, 0.0, StepState()
        if resume_ckpt is not None:
            self._restore(resume_ckpt)

        train_model: nn.Module = model
        if dist_ctx.distributed:
            train_model = wrap_ddp(train_model, device=self.device, sync_bn=cfg.sync_bn)
        if self.runtime.compile != "off":
            train_model = torch.compile(train_model, mode=self.runtime.compile)
        self.train_model = train_model

        nb = len(self.train_loader)
        self.warmup_steps = max(round(self.hyp["warmup_epochs"] * nb), cfg.warmup_min_steps)
        if dist_ctx.is_main:
            self._save_settings(train_scan)

    def _transfer(self, model: nn.Module, weights: str) -> None:
        from tphyolo.checkpoint import load_checkpoint
        from tphyolo.engine.transfer import transfer_weights

        ckpt = load_checkpoint(weights)
        done, total = transfer_weights(
            model, ckpt.weights, source_yaml=ckpt.model_yaml, target_yaml=getattr(model, "yaml", None)
        )
        if self.dist.is_main:
            LOGGER.info("transferred %d/%d tensors from %s", done, total, weights)

    def _check_anchors(self, model: nn.Module, dataset: Any) -> None:
        """Refit the anchors when their best possible recall on the training boxes is low (or none are given)."""
        from tphyolo.engine.autoanchor import autoanchor, label_wh, match_anchor_order

        head = model.head
        records = dataset.records
        boxes_wh = [
            (r.labels.boxes[:, 2:] - r.labels.boxes[:, :2]) / np.array([r.width, r.height], dtype=np.float32)
            for r in records
        ]
        shapes = np.array([(r.width, r.height) for r in records], dtype=np.float64)
        wh = label_wh(boxes_wh, shapes, imgsz=self.imgsz)
        strides = head.stride.view(-1, 1, 1)
        current = (head.anchors * strides).cpu().numpy()  # (nl, na, 2) pixels
        anchors = head.na if getattr(model, "anchors_need_fitting", False) else current
        if self.dist.is_main and len(wh):
            result = autoanchor(wh, anchors, num_levels=head.nl, thr=self.hyp["anchor_t"], seed=self.cfg.seed)
            before = "none" if result.bpr_before is None else f"{result.bpr_before:.4f}"
            LOGGER.info(
                "autoanchor: best possible recall %s -> %.4f%s",
                before,
                result.bpr_after,
                " (anchors refitted)" if result.replaced else "",
            )
            if result.replaced:
                ordered = match_anchor_order(result.anchors, head.stride.tolist())
                new = torch.as_tensor(ordered, dtype=head.anchors.dtype).view_as(head.anchors)
                head.set_anchors_(new / strides.to(new.dtype).cpu())
        if self.dist.distributed:
            torch.distributed.broadcast(head.anchors, src=0)

    def _restore(self, ckpt: Any) -> None:
        state = ckpt.state
        self.optimizer.load_state_dict(state["optimizer"])
        if state.get("scheduler"):
            self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if self.ema is not None and ckpt.ema is not None:
            self.ema.ema.load_state_dict(ckpt.ema)
            self.ema.updates = int(state.get("ema_updates", 0))
        self.start_epoch = int(state["epoch"]) + 1
        self.best_fitness = float(state.get("best_fitness", 0.0))
        progress = state.get("train_args", {}).get("_progress", {})
        self.state = StepState(step=int(progress.get("step", 0)), last_opt_step=int(progress.get("last_opt_step", -1)))
        if state.get("rng_state") and self.dist.rank == 0:
            set_rng_state(state["rng_state"])
        if self.start_epoch >= self.cfg.epochs:
            raise ValueError(
                f"{self.resume_from}: the run already finished its {self.cfg.epochs} epochs; nothing to resume"
            )

    def _save_settings(self, train_scan: Any) -> None:
        with (self.run_dir / "args.yaml").open("w") as f:
            yaml.safe_dump({**self.cfg.to_dict(), "runtime": asdict(self.runtime)}, f, sort_keys=False)
        with (self.run_dir / "hyp.yaml").open("w") as f:
            yaml.safe_dump(self.hyp_raw, f, sort_keys=False)
        if self.cfg.plots and self.start_epoch == 0:
            from tphyolo.engine.train_plots import plot_labels
            from tphyolo.ops.boxes import xyxy_to_cxcywh

            records = self.train_set.records
            classes = np.concatenate([r.labels.classes for r in records] + [np.zeros(0, np.int64)])
            boxes = [r.labels.boxes / np.array([r.width, r.height] * 2, dtype=np.float32) for r in records]
            cxcywh = xyxy_to_cxcywh(np.concatenate([*boxes, np.zeros((0, 4), np.float32)]))
            plot_labels(classes, cxcywh, self.names, self.run_dir / "labels.jpg")

    # ---------------------------------------------------------------------------------------------- the loop
    def fit(self) -> TrainResult:
        """Train for the configured epochs (or until early stopping); returns where the results are."""
        self.setup()
        cfg, dist_ctx = self.cfg, self.dist
        log = None
        if dist_ctx.is_main:
            from tphyolo.engine.train_log import TrainLog

            log = TrainLog(self.run_dir)
            LOGGER.info(
                "training %s on %s for %d epochs, %d px, batch %d x %d process(es), accumulate %d, results in %s",
                cfg.model, cfg.data, cfg.epochs, self.imgsz, cfg.batch, dist_ctx.world_size, self.accumulate,
                self.run_dir,
            )  # fmt: skip
        epochs_without_gain = 0
        metrics: dict[str, float] = {}
        epoch = self.start_epoch
        rng = random.Random(cfg.seed)
        try:
            for epoch in range(self.start_epoch, cfg.epochs):
                metrics = self._run_epoch(epoch, rng, log)
                if dist_ctx.is_main:
                    fit_value = fitness(metrics)
                    improved = fit_value > self.best_fitness
                    if improved:
                        self.best_fitness = fit_value
                        epochs_without_gain = 0
                    else:
                        epochs_without_gain += 1
                    self._save(epoch, improved)
                stop = cfg.patience > 0 and epochs_without_gain >= cfg.patience
                stop = bool(broadcast_object(dist_ctx, stop))
                if stop:
                    if dist_ctx.is_main:
                        LOGGER.info("no improvement for %d epochs: stopping early at epoch %d", cfg.patience, epoch)
                    break
        finally:
            if log is not None:
                log.close()
            destroy_process_group(dist_ctx)
        best = self.weights_dir / "best.pt"
        if dist_ctx.is_main and cfg.plots and (self.run_dir / "results.csv").exists():
            from tphyolo.engine.train_log import plot_results

            plot_results(self.run_dir / "results.csv")
        return TrainResult(
            run_dir=self.run_dir,
            last=self.weights_dir / "last.pt",
            best=best if best.exists() else None,
            epochs_run=epoch + 1 - self.start_epoch,
            best_fitness=self.best_fitness,
            final_metrics=metrics,
        )

    def _run_epoch(self, epoch: int, rng: random.Random, log: Any) -> dict[str, float]:
        cfg, dist_ctx = self.cfg, self.dist
        if dist_ctx.distributed:
            self.train_loader.sampler.set_epoch(epoch)
        multi_scale = None
        if cfg.multi_scale:
            from tphyolo.data.loader import multiscale_size

            multi_scale = lambda step: multiscale_size(self.imgsz, rng, stride=self.gs)  # noqa: E731
        bar = None
        progress = None
        if dist_ctx.is_main:
            from tqdm import tqdm

            bar = tqdm(total=len(self.train_loader), desc=f"epoch {epoch + 1}/{cfg.epochs}", leave=False)

            def progress(i: int, mean_items: torch.Tensor, batch: Any) -> None:
                memory = torch.cuda.memory_reserved(self.device) / 2**30 if self.device.type == "cuda" else 0.0
                box, obj, cls = mean_items.tolist()
                bar.set_postfix_str(
                    f"box {box:.4f} obj {obj:.4f} cls {cls:.4f} inst {batch.targets.shape[0]} "
                    f"img {batch.images.shape[-1]} mem {memory:.2f}G"
                )
                bar.update(1)

        on_batch = None
        if dist_ctx.is_main and cfg.plots and epoch == self.start_epoch:
            from tphyolo.engine.train_plots import plot_batch

            def on_batch(i: int, batch: Any) -> None:
                if i < 3:
                    plot_batch(batch.images, batch.targets, self.names, self.run_dir / f"train_batch{i}.jpg")

        start = time.perf_counter()
        mean_items = train_one_epoch(
            self.train_model,
            self.loss_fn,
            self.train_loader,
            self.optimizer,
            scaler=self.scaler,
            ema=self.ema,
            state=self.state,
            epoch=epoch,
            epoch_factor=self.lf(epoch),
            hyp=self.hyp,
            accumulate=self.accumulate,
            warmup_steps=self.warmup_steps,
            runtime=self.runtime,
            device=self.device,
            dist_ctx=dist_ctx,
            grad_clip=cfg.grad_clip,
            multi_scale_size=multi_scale,
            progress=progress,
            on_batch=on_batch,
        )
        if bar is not None:
            bar.close()
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        self.scheduler.step()
        seconds = time.perf_counter() - start
        if not dist_ctx.is_main:
            barrier(dist_ctx)
            return {}
        metrics = self.validate()
        values = {f"train/{name}_loss": float(v) for name, v in zip(LOSS_NAMES, mean_items.tolist(), strict=True)}
        values.update(metrics)
        values.update({f"lr/pg{i}": lr for i, lr in enumerate(lrs)})
        values["time/epoch_s"] = seconds
        log.log(epoch, values)
        images = len(self.train_set)
        LOGGER.info(
            "epoch %d/%d  loss %.4f %.4f %.4f  P %.3f R %.3f mAP50 %.3f mAP50-95 %.3f  %.1f img/s",
            epoch + 1, cfg.epochs, *mean_items.tolist(), metrics.get("metrics/precision", 0.0),
            metrics.get("metrics/recall", 0.0), metrics.get("metrics/mAP50", 0.0),
            metrics.get("metrics/mAP50-95", 0.0), images / max(seconds, 1e-9),
        )  # fmt: skip
        barrier(dist_ctx)
        return metrics

    def validate(self) -> dict[str, float]:
        """Validate the EMA model on the val split; metrics keyed as in results.csv."""
        from tphyolo.engine.evaluate import evaluate
        from tphyolo.engine.inference import InferenceConfig

        config = InferenceConfig(conf=self.cfg.val_conf, iou=self.cfg.val_iou, max_det=self.cfg.max_det)
        results = evaluate(
            self.ema.ema, self.val_loader, names=self.names, config=config, runtime=self.runtime, device=self.device
        )
        return {
            "metrics/precision": float(results.mp),
            "metrics/recall": float(results.mr),
            "metrics/mAP50": float(results.map50),
            "metrics/mAP50-95": float(results.map),
        }

    def _save(self, epoch: int, improved: bool) -> None:
        from tphyolo.checkpoint import save_checkpoint

        model = unwrap(self.model)
        payload = {
            "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "ema": {k: v.detach().cpu() for k, v in self.ema.ema.state_dict().items()},
            "model_yaml": model.yaml,
            "names": list(self.names),
            "nc": model.nc,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "epoch": epoch,
            "best_fitness": self.best_fitness,
            "ema_updates": self.ema.updates,
            "train_args": {
                **self.cfg.to_dict(),
                "_progress": {"step": self.state.step, "last_opt_step": self.state.last_opt_step},
            },
            "rng_state": rng_state(),
        }
        last = save_checkpoint(self.weights_dir / "last.pt", payload)
        if improved:
            save_checkpoint(self.weights_dir / "best.pt", payload)
        if self.cfg.save_period > 0 and (epoch + 1) % self.cfg.save_period == 0:
            save_checkpoint(self.weights_dir / f"epoch{epoch + 1}.pt", payload)
        LOGGER.debug("saved %s", last)


def train(cfg: TrainConfig | None = None, runtime: RuntimeConfig | None = None, **overrides: Any) -> TrainResult:
    """Train a model: `tphyolo.train(data="my.yaml", model="tph-yolov5s", epochs=65)`.

    Keyword overrides are TrainConfig fields; the result says where the weights and logs are.
    """
    cfg = replace(cfg or TrainConfig(), **overrides)
    return Trainer(cfg, runtime or RuntimeConfig()).fit()

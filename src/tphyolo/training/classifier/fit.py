"""Training and validating a crop classifier on ground-truth crops of a detection dataset.

Training crops come from the train split (augmented, `dataset.py`), validation crops from the val split
(exactly the crops inference would classify). Every epoch appends a row to results.csv and writes
weights/last.pt; weights/best.pt is the epoch with the best mean per-class accuracy on val (ties: the lower val
loss). At the end the best weights are evaluated again: confusion_matrix.png and the per-class accuracy table.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from tphyolo.classify.checkpoint import ClassifierCheckpoint, load_classifier, save_classifier
from tphyolo.classify.classifier import resolve_class_ids
from tphyolo.classify.config import MIN_BOX_SIDE, ClassifyConfig
from tphyolo.classify.crops import CropSet, extract_crops, extract_patches
from tphyolo.classify.data import confusable_classes, scan_records, select_classes
from tphyolo.classify.dataset import CropAugment, CropSetDataset, PatchDataset
from tphyolo.classify.model import build_classifier, load_start_weights
from tphyolo.classify.report import Accuracy, plot_confusion
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.report import shared_images_warning
from tphyolo.errors import InputError
from tphyolo.runtime.config import RuntimeConfig, autocast
from tphyolo.runtime.run_dir import new_run_dir, removed_if_left_empty
from tphyolo.training.classifier.sweep import WeightSweep, save_weight, sweep_weight

WARMUP_EPOCHS = 1
FINAL_LR_RATIO = 0.01  # cosine decay ends at this fraction of the initial learning rate
PATCH_SIDE_FACTOR = 4  # training patches are kept at most this many crop sizes on their long side


@dataclass(frozen=True)
class ClassifyResult:
    """Where a run wrote its results, and the validation accuracy of its best weights."""

    run_dir: Path
    best: Path
    last: Path
    accuracy: Accuracy
    seconds: float
    sweep: WeightSweep | None = None


def build_optimizer(cfg: ClassifyConfig, net: nn.Module) -> torch.optim.Optimizer:
    """AdamW or SGD (momentum 0.9, Nesterov); weight decay on weight matrices and kernels only."""
    decay = [p for p in net.parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for p in net.parameters() if p.requires_grad and p.ndim <= 1]
    groups = [{"params": decay, "weight_decay": cfg.decay}, {"params": no_decay, "weight_decay": 0.0}]
    if cfg.optimizer == "SGD":
        return torch.optim.SGD(groups, lr=cfg.learning_rate, momentum=0.9, nesterov=True)
    return torch.optim.AdamW(groups, lr=cfg.learning_rate)


def cosine_schedule(optimizer: torch.optim.Optimizer, *, total_steps: int, warmup_steps: int):
    """Per-step learning rate: linear warm-up, then cosine decay to FINAL_LR_RATIO of the initial rate."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return FINAL_LR_RATIO + (1 - FINAL_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def train_one_epoch(
    model: nn.Module, loader: DataLoader, optimizer, scheduler, *, scaler, device: torch.device, runtime: RuntimeConfig
) -> float:
    """One pass over `loader` of (uint8 crops, labels); returns the mean training loss."""
    model.train()
    total, count = 0.0, 0
    for crops, labels in loader:
        x = runtime.prepare_images(crops, device, training=True)  # (B, 3, S, S) float in [0, 1]
        labels = labels.to(device)
        with autocast(runtime, device):
            loss = nn.functional.cross_entropy(model(x).float(), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        total += float(loss.detach()) * len(labels)
        count += len(labels)
    return total / max(1, count)


@torch.inference_mode()
def evaluate(
    model: nn.Module, loader: DataLoader, *, names: tuple[str, ...], device: torch.device, runtime: RuntimeConfig
) -> tuple[float, Accuracy]:
    """(mean cross-entropy, Accuracy) of `model` on a loader of (uint8 crops, labels)."""
    model.eval()
    total, predicted, true = 0.0, [], []
    for crops, labels in loader:
        with autocast(runtime, device):
            logits = model(runtime.prepare_images(crops, device)).float()
        total += float(nn.functional.cross_entropy(logits, labels.to(device), reduction="sum"))
        predicted.append(logits.argmax(1).cpu().numpy())
        true.append(labels.numpy())
    n = sum(len(t) for t in true)
    pred = np.concatenate(predicted) if predicted else np.zeros(0, np.int64)
    truth = np.concatenate(true) if true else np.zeros(0, np.int64)
    return total / max(1, n), Accuracy.from_predictions(pred, truth, names)


def eval_loader(crops: CropSet, *, batch: int, workers: int) -> DataLoader:
    return DataLoader(CropSetDataset(crops), batch_size=batch, shuffle=False, num_workers=workers)


def _append_row(path: Path, row: dict[str, float]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(list(row))
        writer.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in row.values()])


def _counts(labels: np.ndarray, names: tuple[str, ...]) -> str:
    counts = np.bincount(labels, minlength=len(names))
    return ", ".join(f"{n} {c}" for n, c in zip(names, counts, strict=True))


@dataclass(frozen=True)
class CropData:
    """What a run trains on: the classes (names, their ids among `dataset_names`), augmented training crops
    and the validation crops."""

    names: tuple[str, ...]
    class_ids: tuple[int, ...]
    dataset_names: tuple[str, ...]
    train: PatchDataset
    val: CropSet


def build_crop_data(cfg: ClassifyConfig) -> CropData:
    """Scan the train and val splits of `cfg.data`, choose the classes and cut their crops. Raises ValueError
    when there are too few objects to train on."""
    data = load_data_config(cfg.data)
    train_split, val_split = scan_records(data, "train"), scan_records(data, "val")
    shared = shared_images_warning([r.im_file for r in train_split.records], [r.im_file for r in val_split.records])
    if shared:
        logging.getLogger(__name__).warning("crop classifier: %s", shared)
    dataset_names = tuple(data.names or train_split.names)
    names, class_ids = select_classes(dataset_names, cfg.classes, confusable_classes(data))
    augment = CropAugment()
    patches = extract_patches(
        train_split.records,
        class_ids,
        margin=augment.margin(cfg.context),
        max_side=PATCH_SIDE_FACTOR * cfg.img,
        min_side=cfg.min_size,
    )
    val = extract_crops(val_split.records, class_ids, context=cfg.context, size=cfg.img, min_side=cfg.min_size)
    if len(patches) < 2 or len(val) == 0:
        raise InputError(
            f"{cfg.data}: {len(patches)} training and {len(val)} validation objects of {list(names)} at least "
            f"{cfg.min_size:g} px: too few to train a classifier"
        )
    train = PatchDataset(patches, size=cfg.img, context=cfg.context, augment=augment, seed=cfg.seed)
    return CropData(names, class_ids, dataset_names, train, val)


def fit_classifier(
    cfg: ClassifyConfig, runtime: RuntimeConfig, *, log: Callable[[str], None] | None = None
) -> ClassifyResult:
    """Train a crop classifier as `cfg` says (module docstring); `log` gets progress lines (default: logging).
    Returns where it wrote what."""
    log = log or logging.getLogger(__name__).info
    start = time.perf_counter()
    data = build_crop_data(cfg)
    log(f"classes {list(data.names)} (dataset ids {list(data.class_ids)}), crops {cfg.img} px, context {cfg.context:g}")
    log(f"train crops: {_counts(data.train.labels, data.names)}; val crops: {_counts(data.val.labels, data.names)}")

    device = runtime.torch_device()
    torch.manual_seed(cfg.seed)
    net = build_classifier(cfg.arch, num_classes=len(data.names))
    if cfg.weights:
        left = load_start_weights(net, cfg.weights)
        log(f"started from {cfg.weights}; initialised anew: {left or 'nothing'}")
    net = runtime.place_model(net, device, training=True)
    model = runtime.compile_model(net)
    generator = torch.Generator().manual_seed(cfg.seed)
    train_loader = DataLoader(data.train, batch_size=min(cfg.batch, len(data.train)), shuffle=True, drop_last=True,
                              num_workers=cfg.workers, generator=generator)  # fmt: skip
    val_loader = eval_loader(data.val, batch=2 * cfg.batch, workers=cfg.workers)
    optimizer = build_optimizer(cfg, net)
    steps = cfg.epochs * len(train_loader)
    warmup = min(steps, WARMUP_EPOCHS * len(train_loader))
    scheduler = cosine_schedule(optimizer, total_steps=steps, warmup_steps=warmup)
    scaler = torch.amp.GradScaler(device.type, enabled=runtime.needs_grad_scaler(device))

    run_dir = new_run_dir(cfg.project, cfg.name, exist_ok=cfg.exist_ok)
    with removed_if_left_empty(run_dir):  # a run that fails before its first file leaves no folder
        weights = run_dir / "weights"
        weights.mkdir(exist_ok=True)
        best_path, last_path, results = weights / "best.pt", weights / "last.pt", run_dir / "results.csv"
        results.unlink(missing_ok=True)
        train_args = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(cfg).items()}
        best_fitness: tuple[float, float] | None = None
        for epoch in range(cfg.epochs):
            epoch_start = time.perf_counter()
            data.train.set_epoch(epoch)
            lr = optimizer.param_groups[0]["lr"]
            train_loss = train_one_epoch(
                model, train_loader, optimizer, scheduler, scaler=scaler, device=device, runtime=runtime
            )
            val_loss, accuracy = evaluate(model, val_loader, names=data.names, device=device, runtime=runtime)
            seconds = time.perf_counter() - epoch_start
            _append_row(results, {"epoch": epoch, "train/loss": train_loss, "val/loss": val_loss,
                                  "val/accuracy": accuracy.accuracy, "val/mean_class_accuracy": accuracy.mean_class,
                                  "lr": lr, "seconds": seconds})  # fmt: skip
            checkpoint = ClassifierCheckpoint(
                model={k: v.detach().cpu().clone() for k, v in net.state_dict().items()},
                arch=cfg.arch,
                names=data.names,
                class_ids=data.class_ids,
                dataset_names=data.dataset_names,
                img=cfg.img,
                context=cfg.context,
                epoch=epoch,
                metrics={
                    "accuracy": accuracy.accuracy, "mean_class_accuracy": accuracy.mean_class, "val_loss": val_loss
                },  # fmt: skip
                train_args=train_args,
            )
            save_classifier(last_path, checkpoint)
            fitness = (accuracy.mean_class, -val_loss)  # ties in accuracy go to the lower loss
            if best_fitness is None or fitness > best_fitness:
                best_fitness = fitness
                save_classifier(best_path, checkpoint)
            log(f"epoch {epoch + 1}/{cfg.epochs}: train loss {train_loss:.4f}, val loss {val_loss:.4f}, "
                f"accuracy {accuracy.accuracy:.3f}, mean class {accuracy.mean_class:.3f} "
                f"({seconds:.1f} s)")  # fmt: skip

        net.load_state_dict(load_classifier(best_path).model)
        _, accuracy = evaluate(net, val_loader, names=data.names, device=device, runtime=runtime)
        plot_confusion(accuracy, run_dir / "confusion_matrix.png")
        sweep = None
        if cfg.detector:
            sweep = sweep_weight(best_path, cfg.detector, cfg.data, runtime=runtime, imgsz=cfg.detector_img,
                                 workers=cfg.workers)  # fmt: skip
            log(f"classifier weight on val with {cfg.detector}:\n{sweep.table()}")
            for path in (best_path, last_path):
                save_weight(path, sweep.best)
        return ClassifyResult(run_dir, best_path, last_path, accuracy, time.perf_counter() - start, sweep)


def validate_classifier(
    weights: str | Path,
    data: str | Path,
    *,
    split: str = "val",
    runtime: RuntimeConfig,
    batch: int = 128,
    workers: int = 0,
    min_side: float = MIN_BOX_SIDE,
) -> Accuracy:
    """Accuracy of the classifier in `weights` on the crops of `split` of `data`, cut with the classifier's own
    crop size and context; its classes are found in the dataset by name (ValueError when one is missing)."""
    checkpoint = load_classifier(weights)
    dataset = load_data_config(data)
    split_records = scan_records(dataset, split)
    class_ids = resolve_class_ids(checkpoint.names, dataset.names or split_records.names)
    crops = extract_crops(
        split_records.records, class_ids, context=checkpoint.context, size=checkpoint.img, min_side=min_side
    )
    if len(crops) == 0:
        raise InputError(f"{data}: no objects of {list(checkpoint.names)} in the '{split}' split")
    device = runtime.torch_device()
    net = runtime.prepare_model(checkpoint.build(), device)
    _, accuracy = evaluate(net, eval_loader(crops, batch=batch, workers=workers), names=checkpoint.names,
                           device=device, runtime=runtime)  # fmt: skip
    return accuracy

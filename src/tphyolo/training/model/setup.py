"""The model of a training run: built fresh or restored, prepared for training, wrapped for DDP and compile.

`build_model_for_training` gives the model (from the config's yaml, or the checkpoint being resumed);
`prepare_model_for_training` transfers pretrained weights, refits anchors to the data, freezes layers and
places the model on its device; `wrap_for_training` adds DistributedDataParallel and torch.compile.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from tphyolo.checkpoint.format import Checkpoint, CheckpointError, load_checkpoint, state_dict_misfit
from tphyolo.data.dataset import DetectionDataset
from tphyolo.errors import InputError
from tphyolo.models import DetectionModel, build_model
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.distributed import DistContext
from tphyolo.training.config import TrainConfig
from tphyolo.training.model.autoanchor import autoanchor, label_wh, match_anchor_order
from tphyolo.training.model.transfer import transfer_weights

LOGGER = logging.getLogger("tphyolo.train")


def build_model_for_training(model: str, *, names: Sequence[str], resume: Checkpoint | None = None) -> DetectionModel:
    """The model to train: `resume`'s model with its weights and class names, else a fresh one built from
    `model` (a yaml or built-in name) for `names` (empty: the yaml's class count, names "0", "1", ...)."""
    if resume is not None:
        restored = build_model(resume.model_yaml, names=resume.names, origin=f"{resume.path} (its model_yaml)")
        if (misfit := state_dict_misfit(restored, resume.model)) is not None:
            raise CheckpointError(f"{resume.path}: weights do not fit the model built from its model_yaml: {misfit}")
        restored.load_state_dict(resume.model)
        return restored
    return build_model(model, num_classes=len(names) or None, names=list(names) or None)


def frozen_layer_indices(freeze: int | Sequence[int]) -> frozenset[int]:
    """The layers `--freeze` names, by YOLOv5's rule: one number N is layers 0..N-1, several are those layers."""
    if isinstance(freeze, int):
        return frozenset(range(freeze))
    return frozenset(range(freeze[0])) if len(freeze) == 1 else frozenset(freeze)


def check_freeze(model: nn.Module, freeze: int | Sequence[int]) -> None:
    """Raises ValueError when `freeze` names a layer the model lacks or the head (nothing would train)."""
    layers, chosen = len(model.model), frozen_layer_indices(freeze)
    if not chosen or max(chosen) < layers - 1:
        return
    if isinstance(freeze, int) or len(freeze) == 1:
        count = freeze if isinstance(freeze, int) else freeze[0]
        raise InputError(f"--freeze {count}: the model has {layers} layers; freeze at most {layers - 1} (not the head)")
    raise InputError(
        f"--freeze {' '.join(map(str, freeze))}: layer {max(chosen)} is not one to freeze; the model has layers "
        f"0..{layers - 1} and {layers - 1} is the head"
    )


def freeze_layers(model: nn.Module, freeze: int | Sequence[int]) -> None:
    """Train all but the layers `freeze` names (`frozen_layer_indices`): parameters of `model.{i}.` for those i
    stop requiring grad (the others are set to require it)."""
    chosen = frozen_layer_indices(freeze)
    for name, param in model.named_parameters():
        layer = int(name.split(".")[1]) if name.startswith("model.") else -1
        param.requires_grad_(layer not in chosen)


def transfer_pretrained(model: DetectionModel, weights: str) -> tuple[int, int]:
    """Copy the matching tensors of checkpoint `weights` into `model` (see `training.model.transfer`); returns
    (transferred, total)."""
    ckpt = load_checkpoint(weights)
    return transfer_weights(model, ckpt.weights, source_yaml=ckpt.model_yaml, target_yaml=model.yaml)


def fit_anchors_to_data(
    model: DetectionModel, dataset: DetectionDataset, *, imgsz: int, anchor_t: float, seed: int, dist: DistContext
) -> None:
    """Refit the head's anchors on rank 0 when their best possible recall on the training boxes is low (or the
    yaml gave only a count), then give every rank rank 0's anchors. The boxes are sized as training sees them:
    each image resized to long side `imgsz`, or at its own size when training on tiles."""
    head = model.head
    records = dataset.records
    boxes_wh = [
        (r.labels.boxes[:, 2:] - r.labels.boxes[:, :2]) / np.array([r.width, r.height], dtype=np.float32)
        for r in records
    ]
    shapes = np.array([(r.width, r.height) for r in records], dtype=np.float64)
    if dataset.tiles is not None:  # windows at the images' own resolution: every image at its own size
        wh = np.concatenate([b * s for b, s in zip(boxes_wh, shapes, strict=True)] + [np.zeros((0, 2))])
    else:
        wh = label_wh(boxes_wh, shapes, imgsz=imgsz)
    strides = head.stride.view(-1, 1, 1)
    current = (head.anchors * strides).cpu().numpy()  # (nl, na, 2) pixels
    anchors = head.na if model.anchors_need_fitting else current
    if dist.is_main and len(wh):
        result = autoanchor(wh, anchors, num_levels=head.nl, thr=anchor_t, seed=seed)
        before = "none" if result.bpr_before is None else f"{result.bpr_before:.4f}"
        refitted = " (anchors refitted)" if result.replaced else ""
        LOGGER.info("autoanchor: best possible recall %s -> %.4f%s", before, result.bpr_after, refitted)
        if result.replaced:
            ordered = match_anchor_order(result.anchors, head.stride.tolist())
            new = torch.as_tensor(ordered, dtype=head.anchors.dtype).view_as(head.anchors)
            head.set_anchors_(new / strides.to(new.dtype).cpu())
    if dist.distributed:
        torch.distributed.broadcast(head.anchors, src=0)


def prepare_model_for_training(
    model: DetectionModel,
    cfg: TrainConfig,
    *,
    train_set: DetectionDataset,
    imgsz: int,
    anchor_t: float,
    resumed: bool,
    dist: DistContext,
    runtime: RuntimeConfig,
    device: torch.device,
) -> nn.Module:
    """`model` ready to train: unless `resumed`, weights transferred from `cfg.weights` and anchors refitted
    (`cfg.autoanchor`); the first `cfg.freeze` layers frozen; placed by `runtime.place_model`. Returns it."""
    if not resumed:
        if cfg.weights:
            done, total = transfer_pretrained(model, cfg.weights)
            if dist.is_main:
                LOGGER.info("transferred %d/%d tensors from %s", done, total, cfg.weights)
        if cfg.autoanchor:
            fit_anchors_to_data(model, train_set, imgsz=imgsz, anchor_t=anchor_t, seed=cfg.seed, dist=dist)
    freeze_layers(model, cfg.freeze)
    return runtime.place_model(model, device, training=True)


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


def wrap_for_training(
    model: nn.Module, *, sync_bn: bool, dist: DistContext, runtime: RuntimeConfig, device: torch.device
) -> nn.Module:
    """The module the loop calls: `model` in DDP when the run is distributed, compiled per `runtime`. It
    shares its parameters with `model`."""
    if dist.distributed:
        model = wrap_ddp(model, device=device, sync_bn=sync_bn)
    return runtime.compile_model(model)

"""The data of a training run: its dataset config, the augmented training set and loaders.

`load_train_data_config` reads (and for 'synthetic' generates) the dataset on rank 0 before the other ranks,
so that they read its caches; `build_data` builds the sets and loaders at the size the model allows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader

from tphyolo.data.augment import Hyp
from tphyolo.data.dataset import DetectionDataset
from tphyolo.data.dataset_config import DataConfig, load_data_config
from tphyolo.data.loader import DatasetSettings, LoaderSettings, build_dataloader, build_dataset
from tphyolo.data.report import format_problems, shared_images_warning
from tphyolo.data.scan import SplitScan, scan_split
from tphyolo.errors import InputError
from tphyolo.infer.slicing import SliceConfig
from tphyolo.runtime.distributed import DistContext, barrier
from tphyolo.runtime.sharding import Shard
from tphyolo.training.config import TrainConfig

LOGGER = logging.getLogger("tphyolo.train")
MIN_GRID = 32  # training sizes are multiples of at least this, as the original's


@dataclass(frozen=True)
class TrainData:
    """What a run trains and validates on.

    config: the resolved dataset; train_set / train_loader: augmented training samples (sharded across the
    processes of a distributed run); val_loader: the val split in rect batches of 2 x batch, in a distributed
    run this rank's share of those batches (`val_shard`: which images; `runtime.sharding`); imgsz: the
    training size, a multiple of `stride`, the size grid of the run; val_slicing: with --tile, the sliced
    inference validation runs on the full val images (windows of imgsz), else None.
    """

    config: DataConfig
    train_set: DetectionDataset
    train_loader: DataLoader
    val_loader: DataLoader
    imgsz: int
    stride: int
    val_shard: Shard
    val_slicing: SliceConfig | None = None


def grid_stride(model: nn.Module) -> int:
    """The size grid of a model's training images: its largest stride, at least MIN_GRID."""
    return max(int(model.stride.max()), MIN_GRID)


def load_train_data_config(
    source: str, dist: DistContext, *, datasets_dir: str | None = None, scan_cache: bool = True
) -> DataConfig:
    """`load_data_config(source)` with class names (`with_split_names`), run on rank 0 before the other ranks
    (which then read its caches)."""

    def load() -> DataConfig:
        config = load_data_config(source, datasets_dir=Path(datasets_dir) if datasets_dir else None)
        return with_split_names(config, scan_cache=scan_cache)

    config = load() if dist.is_main else None
    barrier(dist)
    return config if config is not None else load()


def with_split_names(config: DataConfig, *, scan_cache: bool) -> DataConfig:
    """`config`, its class names filled from the scan of its train split when it names none (a bare folder):
    a format's own names (VisDrone's ten), else class0, class1, ... up to the largest class id."""
    if config.names or not config.train:
        return config
    return replace(config, names=scan_split(config.train, names=(), cache=scan_cache).names)


def warn_if_val_is_train(train_set: DetectionDataset, val_set: DetectionDataset) -> None:
    """Logs a warning when validation images are also training images (`shared_images_warning`)."""
    message = shared_images_warning([r.im_file for r in train_set.records], [r.im_file for r in val_set.records])
    if message:
        LOGGER.warning("%s", message)


def _report_problems(split: str, scan: SplitScan) -> None:
    if problems := format_problems(split, scan):  # files skipped, and files used in part
        LOGGER.warning(problems)


def build_data(
    cfg: TrainConfig,
    config: DataConfig,
    *,
    hyp: Mapping[str, float],
    imgsz: int,
    stride: int,
    dist: DistContext,
    device: torch.device,
) -> TrainData:
    """The training set and loader (augmented per `hyp`, at `imgsz` on the `stride` grid) and the validation
    loader (this rank's share of it). Raises ValueError when the train split has no usable image."""
    train_set, train_scan = build_dataset(
        config,
        "train",
        DatasetSettings(
            imgsz=imgsz,
            augment=True,
            hyp=Hyp.from_dict(dict(hyp)),
            rect=cfg.rect,
            batch_size=cfg.batch,
            stride=stride,
            ignore_mode=cfg.ignore_mode,
            cache=cfg.cache,
            scan_cache=cfg.scan_cache,
            seed=cfg.seed,
            single_class=cfg.single_cls,
            tile=cfg.tile,
        ),
    )
    if dist.is_main:
        _report_problems("train", train_scan)
        if train_set.tiles is not None:
            LOGGER.info("%s", train_set.tiles.describe())
    if len(train_set) == 0:
        raise InputError(f"data {cfg.data!r}: no usable training images (run `tphyolo data check`)")
    train_loader = build_dataloader(
        train_set,
        LoaderSettings(
            batch_size=cfg.batch,
            workers=cfg.workers,
            shuffle=not cfg.rect,
            seed=cfg.seed,
            persistent_workers=cfg.workers > 0,
            pin_memory=device.type == "cuda",
            distributed=dist.distributed,
            rank=dist.rank,
            world_size=dist.world_size,
        ),
    )
    val_batch = cfg.batch * 2
    val_set, val_scan = build_dataset(
        config,
        "val",
        DatasetSettings(
            imgsz=imgsz,
            augment=False,
            rect=True,
            batch_size=val_batch,
            stride=stride,
            scan_cache=cfg.scan_cache,
            single_class=cfg.single_cls,
        ),
    )
    if dist.is_main:
        _report_problems("val", val_scan)
        warn_if_val_is_train(train_set, val_set)
    val_workers = min(cfg.workers, 2)
    val_shard = Shard.of(len(val_set), unit=val_batch, ctx=dist)  # whole one-process batches per rank
    # Persistent: workers forked once. Forked again at every validation, they would share the heap that
    # training has grown by then, and each page the trainer writes afterwards would be copied (a fault).
    val_loader = build_dataloader(
        val_set,
        LoaderSettings(
            batch_size=val_batch,
            workers=val_workers,
            shuffle=False,
            persistent_workers=val_workers > 0,
            indices=val_shard.indices if dist.distributed else None,
        ),
    )
    val_slicing = SliceConfig(imgsz) if cfg.tile else None
    return TrainData(config, train_set, train_loader, val_loader, imgsz, stride, val_shard, val_slicing)

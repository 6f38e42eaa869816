"""Batches: collating samples, the DataLoader builder and its epochs, worker seeding, multi-scale resizing.

A loader starts at most as many worker processes as can run at once (`usable_workers`): more than the CPU
cores this process may use (shared among the processes of a distributed run), or than the images of a batch,
only add start-up time and memory. A smaller count than asked is said in a log line.

Workers are forked, unless the process has loaded a runtime with thread pools of its own (OpenVINO, ONNX Runtime:
`worker_context`): a worker forked while one of its threads holds a lock waits for that lock forever, so such a
process starts its workers from a fork server. A loader that gets no batch from its workers in `timeout` seconds
(`WORKER_TIMEOUT_S`) ends the run with a TimeoutError naming its images, instead of waiting forever.

`Batch` holds everything evaluation and prediction need to map boxes back to original pixels:
x0 = (x - pads[i, 0]) / ratios[i, 0], y0 = (y - pads[i, 1]) / ratios[i, 1] for image i.
"""

from __future__ import annotations

import logging
import multiprocessing
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, get_worker_info

from tphyolo.cores import available_cores
from tphyolo.data.augment import Hyp
from tphyolo.data.dataset import DetectionDataset, RectBatches, Sample
from tphyolo.data.dataset_config import DataConfig
from tphyolo.data.letterbox import PAD_VALUE
from tphyolo.data.sampler import EpochSampler
from tphyolo.data.scan import SplitScan, scan_split
from tphyolo.errors import InputError

LOGGER = logging.getLogger("tphyolo")

# The longest a loader waits for its workers' next batch before the run fails (`LoaderSettings.timeout`). The
# slowest honest batch measured here, 32 mosaic samples of 1920x1080 VisDrone images at 1536 px made by one
# process on a 2-core Xeon at a load average of 10, took 9.5 s (2.6 s of CPU); 300 s is far past that and a
# slow network disk, and still ends a run whose worker hangs within minutes instead of never.
WORKER_TIMEOUT_S = 300.0

# How often a loader waiting for a batch looks whether its workers still run (torch's own interval): a worker
# that died is reported then, a worker that hangs once WORKER_TIMEOUT_S have passed.
WORKER_POLL_S = 5.0

# Runtimes that run thread pools of their own: a process that has imported one may hold its threads.
THREADED_RUNTIMES = ("openvino", "onnxruntime")

# What the fork server imports once, before it forks workers: torch and the datasets, which each worker would
# otherwise import anew (seconds).
_FORKSERVER_PRELOAD = ["__main__", "tphyolo.data.loader"]


@dataclass
class Batch:
    """A collated batch of B images.

    images: (B, 3, H, W) uint8 RGB (images smaller than the batch are padded right/bottom with 114);
    targets: (n, 6) float32 `image index, class, cx, cy, w, h`, coordinates normalised by (W, H);
    ignore: B tensors (k_i, 4) float32, xyxy pixels of the batch image (ignore regions, may be empty);
    paths: B image files; shapes0: (B, 2) int64 original (h0, w0);
    ratios: (B, 2) float32 (rx, ry) batch-image / original; pads: (B, 2) float32 (left, top) pixels.
    """

    images: torch.Tensor
    targets: torch.Tensor
    ignore: list[torch.Tensor]
    paths: list[str]
    shapes0: torch.Tensor
    ratios: torch.Tensor
    pads: torch.Tensor

    def __len__(self) -> int:
        return self.images.shape[0]

    def pin_memory(self) -> Batch:
        return replace(
            self,
            images=self.images.pin_memory(),
            targets=self.targets.pin_memory(),
            ignore=[g.pin_memory() for g in self.ignore],
        )

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Batch:
        """Images, targets and ignore regions on `device` (metadata stays on the CPU)."""
        return replace(
            self,
            images=self.images.to(device, non_blocking=non_blocking),
            targets=self.targets.to(device, non_blocking=non_blocking),
            ignore=[g.to(device, non_blocking=non_blocking) for g in self.ignore],
        )

    def resized(self, size: int | tuple[int, int]) -> Batch:
        """The batch bilinearly resized to `size` (h, w) (an int: the long side, aspect kept) for multi-scale
        training; normalised targets are unchanged, ignore regions, ratios and pads are rescaled."""
        n, c, h, w = self.images.shape
        if isinstance(size, int):
            r = size / max(h, w)
            size = (max(1, round(h * r)), max(1, round(w * r)))
        new_h, new_w = size
        if (new_h, new_w) == (h, w):
            return self
        images = F.interpolate(self.images.float(), size=(new_h, new_w), mode="bilinear", align_corners=False)
        scale = torch.tensor([new_w / w, new_h / h])
        return replace(
            self,
            images=images.round_().clamp_(0, 255).to(torch.uint8),
            ignore=[g * scale.repeat(2).to(g.device) for g in self.ignore],
            ratios=self.ratios * scale,
            pads=self.pads * scale,
        )


def multiscale_size(imgsz: int, rng: random.Random | np.random.Generator, *, stride: int = 32) -> int:
    """A random training size in [0.5 imgsz, 1.5 imgsz], a multiple of `stride` (chosen per batch)."""
    low, high = int(imgsz * 0.5), int(imgsz * 1.5) + stride
    value = rng.integers(low, high) if isinstance(rng, np.random.Generator) else rng.randrange(low, high)
    return max(stride, int(value) // stride * stride)


def step_size(imgsz: int, *, seed: int, step: int, stride: int = 32) -> int:
    """The multi-scale training size of batch `step` (counted from the start of training) of a run seeded `seed`:
    a function of the two alone, so that a resumed run draws the sizes the uninterrupted one drew, and every
    process of a distributed run the same one."""
    return multiscale_size(imgsz, np.random.default_rng([seed % 2**64, step]), stride=stride)


def collate(samples: list[Sample]) -> Batch:
    """Stack samples into a Batch (see its docstring)."""
    h = max(s.image.shape[1] for s in samples)
    w = max(s.image.shape[2] for s in samples)
    images = torch.full((len(samples), 3, h, w), PAD_VALUE, dtype=torch.uint8)
    targets = []
    for i, s in enumerate(samples):
        images[i, :, : s.image.shape[1], : s.image.shape[2]] = s.image
        labels = s.labels
        if (s.image.shape[1], s.image.shape[2]) != (h, w) and len(labels):
            sh, sw = s.image.shape[1:]
            labels = labels * torch.tensor([1, sw / w, sh / h, sw / w, sh / h])
        targets.append(torch.cat([torch.full((len(labels), 1), float(i)), labels], dim=1))
    return Batch(
        images=images,
        targets=torch.cat(targets) if targets else torch.zeros((0, 6)),
        ignore=[s.ignore for s in samples],
        paths=[s.path for s in samples],
        shapes0=torch.tensor([s.shape0 for s in samples], dtype=torch.int64),
        ratios=torch.tensor([s.ratio for s in samples], dtype=torch.float32),
        pads=torch.tensor([s.pad for s in samples], dtype=torch.float32),
    )


def seed_worker(worker_id: int) -> None:
    """DataLoader worker_init_fn: seed the worker's Python and NumPy generators from the loader's per-worker
    seed (torch seeds its own), for code in a worker that draws from them; the samples of a DetectionDataset
    draw from their own generators (see dataset.py).

    OpenCV's thread pool is left alone here: reconfiguring it in a forked child can deadlock when the parent
    used it before forking."""
    seed = get_worker_info().seed % 2**32
    random.seed(seed)
    np.random.seed(seed)


def worker_context() -> multiprocessing.context.BaseContext | None:
    """How a loader starts its workers: None (torch's default: forked on Linux) while no THREADED_RUNTIMES module
    is loaded, else from a fork server, a process that has imported torch and the datasets and runs no other
    thread (where the platform has one; elsewhere the default, spawn, is safe). Forking is safe beside torch's own
    threads (a worker runs one intra-op thread of its own and takes none of their locks), not beside a compiled
    runtime's pool; the fork server costs one import of torch per process (docs/performance.md), and a script
    that runs a loader must then guard its top level with `if __name__ == "__main__":`, as spawn asks."""
    threaded = any(name in sys.modules for name in THREADED_RUNTIMES)
    if not threaded or "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_FORKSERVER_PRELOAD)  # read when the server starts, once per process
    return context


def stop_workers(loader: object) -> None:
    """End `loader`'s persistent worker processes now; the next iteration starts new ones. Left to the
    interpreter's exit, forked workers are ended after a threaded runtime loaded since (OpenVINO, ONNX Runtime)
    has started its threads, and the process crashed there (exit 139 after a training's final validation)."""
    if getattr(loader, "_iterator", None) is not None:  # torch's DataLoader keeps its persistent workers' iterator
        loader._iterator = None  # its finaliser shuts the workers down


class _TimedLoader(DataLoader):
    """A DataLoader that waits at most `patience` seconds for its workers' next batch, then raises a TimeoutError
    naming its images (torch's own timeout names nothing). Its `timeout` is the poll interval: between polls torch
    checks that the workers still run, which a single long timeout would put off."""

    def __init__(self, *args, patience: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.patience = patience

    def __iter__(self):
        batches = super().__iter__()
        waited = 0.0
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except RuntimeError as error:
                if not str(error).startswith("DataLoader timed out"):
                    raise
                waited += self.timeout
                if waited < self.patience:
                    continue  # the same batch is waited for again
                raise TimeoutError(
                    f"{_images_of(self.dataset)}: the data loader got no batch from its {self.num_workers} worker "
                    f"process(es) in {self.patience:g} s (a worker hangs); --workers 0 reads in the main process"
                ) from None
            waited = 0.0
            yield batch


def _images_of(dataset) -> str:
    """The folder of `dataset`'s first image (a DetectionDataset's), else its class name, for messages."""
    records = getattr(dataset, "records", None)
    return str(Path(records[0].im_file).parent) if records else type(dataset).__name__


def worker_base_seed(seed: int, rank: int, epoch: int) -> int:
    """The seed that the workers a loader starts for `epoch` derive theirs from (each adds its worker id)."""
    return int(np.random.SeedSequence([seed % 2**64, rank, epoch]).generate_state(1, np.uint64)[0] >> 1)


def set_loader_epoch(loader: DataLoader, epoch: int) -> None:
    """Ready a `build_dataloader` loader for `epoch`: the order and augmentation of its samples (EpochSampler)
    and the seeds of the workers started for it are functions of (seed, rank, epoch), so a run resumed at
    `epoch` sees what the uninterrupted run saw. Persistent workers keep the seeds of the epoch they started
    at; what they draw for a sample does not depend on them."""
    sampler = loader.sampler
    sampler.set_epoch(epoch)
    loader.generator.manual_seed(worker_base_seed(sampler.seed, sampler.rank, epoch))


def usable_workers(asked: int, *, batch_size: int, world_size: int = 1) -> int:
    """The loader processes to start for `asked`: at most the cores per process of a `world_size`-process run
    and the images of a batch (YOLOv5's rule), at least 1 when any were asked; logged when fewer than asked."""
    if asked <= 0:
        return 0
    cores = max(1, available_cores() // max(world_size, 1))
    used = max(1, min(asked, cores, batch_size))
    if used < asked:
        LOGGER.info(
            "data loader: %d worker(s) asked, %d started (%d CPU core(s) per process, batch %d)",
            asked, used, cores, batch_size,
        )  # fmt: skip
    return used


@dataclass(frozen=True)
class LoaderSettings:
    """How `build_dataloader` batches a dataset.

    batch_size: images per batch; workers: loader processes (capped by `usable_workers`); shuffle: in the order
    of an `EpochSampler` shuffled from (seed, epoch) (never for rect datasets, whose batches are pre-shaped by
    order); persistent_workers, pin_memory, prefetch_factor, drop_last: as torch's DataLoader; distributed:
    process `rank` of `world_size` gets its share of each epoch; indices: only these items, in this order,
    instead (a rank's share of an evaluation, `tphyolo.runtime.sharding`); not with shuffle or distributed;
    timeout: the seconds to wait for the workers' next batch before a TimeoutError ends the run.
    """

    batch_size: int
    workers: int = 0
    shuffle: bool = False
    seed: int = 0
    persistent_workers: bool = False
    pin_memory: bool = False
    prefetch_factor: int = 2
    distributed: bool = False
    rank: int = 0
    world_size: int = 1
    drop_last: bool = False
    indices: Sequence[int] | None = None
    timeout: float = WORKER_TIMEOUT_S


def build_dataloader(dataset: DetectionDataset, settings: LoaderSettings) -> DataLoader:
    """A DataLoader yielding `Batch`es as `settings` say. Call `set_loader_epoch(loader, epoch)` before each
    epoch (it starts at epoch 0)."""
    s = settings
    workers = usable_workers(s.workers, batch_size=s.batch_size, world_size=s.world_size if s.distributed else 1)
    if s.shuffle and getattr(dataset, "rect", False):
        raise InputError("a rect dataset must not be shuffled (batch shapes follow the aspect-ratio order)")
    if s.indices is not None and (s.shuffle or s.distributed):
        raise InputError("indices choose the items in order: not with shuffle or distributed")
    rank, world_size = (s.rank, s.world_size) if s.distributed else (0, 1)
    sampler = EpochSampler(
        len(dataset), shuffle=s.shuffle, seed=s.seed, rank=rank, world_size=world_size, drop_last=s.drop_last
    ) if s.indices is None else list(s.indices)  # fmt: skip
    generator = torch.Generator()
    generator.manual_seed(worker_base_seed(s.seed, rank, 0))
    return _TimedLoader(
        dataset,
        batch_size=s.batch_size,
        sampler=sampler,
        num_workers=workers,
        multiprocessing_context=worker_context() if workers > 0 else None,
        timeout=min(WORKER_POLL_S, s.timeout) if workers > 0 else 0,
        patience=s.timeout,
        persistent_workers=s.persistent_workers and workers > 0,
        pin_memory=s.pin_memory,
        prefetch_factor=s.prefetch_factor if workers > 0 else None,
        collate_fn=collate,
        worker_init_fn=seed_worker if workers > 0 else None,
        generator=generator,
        drop_last=s.drop_last,
    )


@dataclass(frozen=True)
class DatasetSettings:
    """How `build_dataset` reads a split: at `imgsz` (long side), augmented per `hyp` or not, in rect batches
    of `batch_size` on the `stride` grid (validation: half-stride padding), ignore regions as `ignore_mode`,
    images cached per `cache`, the label scan cached unless `scan_cache` is False, samples drawn from `seed`;
    `single_class`: every object is class 0 (the scan still checks the ids against the data's names); `tile`:
    samples are windows of `imgsz` px cut from the images at their own resolution (`TileWindows`)."""

    imgsz: int = 640
    augment: bool = False
    hyp: Hyp | None = None
    rect: bool = False
    batch_size: int = 16
    stride: int = 32
    ignore_mode: str = "fill"
    cache: str | None = None
    scan_cache: bool = True
    seed: int = 0
    single_class: bool = False
    tile: bool = False


def build_dataset(data: DataConfig, split: str, settings: DatasetSettings) -> tuple[DetectionDataset, SplitScan]:
    """Scan `split` of `data` and wrap it in a DetectionDataset read as `settings` say."""
    s = settings
    sources = data.split(split)
    if not sources:
        raise InputError(f"data {data.source or data.root}: no '{split}' split")
    scan = scan_split(sources, names=data.names, categories=data.categories, cache=s.scan_cache)
    records = scan.records
    if not records:
        where = ", ".join(map(str, sources))
        raise InputError(
            f"{where}: no usable images in the '{split}' split ({scan.report.summary()}); `tphyolo data check` "
            "lists the problems"
        )
    if s.single_class:
        records = [replace(r, labels=replace(r.labels, classes=np.zeros_like(r.labels.classes))) for r in records]
    dataset = DetectionDataset(
        records,
        imgsz=s.imgsz,
        augment=s.augment,
        hyp=s.hyp,
        rect=RectBatches(s.batch_size, pad=0.0 if s.augment else 0.5) if s.rect else None,
        stride=s.stride,
        ignore_mode=s.ignore_mode,
        cache=s.cache,
        seed=s.seed,
        tile=s.imgsz if s.tile else None,
    )
    return dataset, scan

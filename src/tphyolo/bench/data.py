"""`bench data`: training-loader throughput (images per second) with mosaic augmentation, by worker count.

The data is a dataset yaml or built-in name, by default the synthetic drone scenes (generated once into the
cache). Each worker count builds a fresh loader, pulls one batch untimed (worker start-up and the first
decodes), then times `batches` more. There is no baseline: the row compares worker counts with each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tphyolo.bench.report import Row, significant
from tphyolo.data.augment import Hyp
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.loader import DatasetSettings, LoaderSettings, build_dataloader, build_dataset
from tphyolo.errors import InputError


def bench_data(
    *,
    image_size: int,
    batch: int,
    workers: Sequence[int],
    batches: int,
    data: str = "synthetic",
    cache_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> list[Row]:

    config = load_data_config(data, cache_dir=cache_dir)
    dataset, _ = build_dataset(
        config, "train", DatasetSettings(imgsz=image_size, augment=True, hyp=Hyp(mosaic=1.0), batch_size=batch)
    )
    if len(dataset) < batch:
        raise InputError(f"bench data: {data} has {len(dataset)} training images, fewer than one batch of {batch}")
    rows = []
    for count in workers:
        loader = build_dataloader(
            dataset, LoaderSettings(batch_size=batch, workers=count, shuffle=True, drop_last=True)
        )
        iterator = iter(_cycle(loader))
        next(iterator)
        start = time.perf_counter()
        for _ in range(batches):
            next(iterator)
        seconds = time.perf_counter() - start
        per_s = batches * batch / seconds
        log(f"data {data} img{image_size} b{batch} workers={count}: {per_s:.1f} images/s")
        rows.append(
            Row(
                "data/loader",
                f"{data} img{image_size} b{batch} mosaic workers={count}",
                1e3 * seconds / batches,
                extra={"images_per_s": significant(per_s)},
            )
        )
        del iterator, loader
    return rows


def _cycle(loader):
    while True:
        yield from loader

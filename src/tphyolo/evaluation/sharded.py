"""Evaluation over the ranks of a distributed run: each rank's share of the images, one progress bar, and the
per-image results gathered on rank 0 in one-process order, where they are scored.

The images are dealt in whole batches of the one-process loader, each batch a unit of the runner of every
sharded run (`predict.runner.units.UnitDeal`): a rank runs batches k, k + W, k + 2W, ... as one process would run
them, so every image gives the same detections, and rank 0 scores the same list one process would score. Only
the per-image results travel (detections and ground truth, a few kB an image); the scores are computed once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tphyolo.predict.runner.units import UnitDeal
from tphyolo.runtime.distributed import DistContext, GlobalCount, gather_to_main
from tphyolo.runtime.sharding import fixed_units

T = TypeVar("T")
POLL_SECONDS = 0.1  # how often rank 0's bar looks at the others' count once its own share is done


@dataclass(frozen=True)
class Shard:
    """This rank's part of `count` items: the units of `unit` consecutive items dealt to it (`deal`, of all the
    run's units: what the progress bar counts) and their items' `indices`, ascending."""

    deal: UnitDeal
    unit: int
    count: int
    indices: tuple[int, ...]

    @classmethod
    def of(cls, count: int, *, unit: int, ctx: DistContext) -> Shard:
        units = fixed_units(count, unit)
        deal = UnitDeal.of(len(units), dist=ctx)
        return cls(deal, unit, count, tuple(i for k in deal.mine for i in units[k]))

    @property
    def ctx(self) -> DistContext:
        return self.deal.dist

    @property
    def units(self) -> int:
        return self.deal.count


def gather_in_order(shard: Shard, values: Sequence[T]) -> list[T] | None:
    """The values of every rank (this rank's `values` are those of `shard.indices`, in order) as one list in
    item order, on rank 0; None on the other ranks."""
    if len(values) != len(shard.indices):
        raise ValueError(f"rank {shard.ctx.rank}: {len(values)} results for {len(shard.indices)} items")
    units = fixed_units(shard.count, shard.unit)
    values, per_unit = list(values), []
    for k in shard.deal.mine:
        per_unit.append(values[: len(units[k])])
        del values[: len(units[k])]
    gathered = shard.deal.gather(per_unit)
    return None if gathered is None else [value for unit in gathered for value in unit]


def gather_speed(shard: Shard, speed: dict[str, float], images: int) -> dict[str, float]:
    """The ms per image of every rank's `speed` (over its `images`), weighted by their images: the time one
    image takes in one process of the run. Rank 0's answer; the other ranks get their own `speed` back."""
    gathered = gather_to_main(shard.ctx, (speed, images))
    if gathered is None:
        return speed
    total = max(sum(n for _, n in gathered), 1)
    return {key: sum(s[key] * n for s, n in gathered) / total for key in speed}


def global_progress(batches: Iterable[Any], shard: Shard, *, desc: str, enabled: bool = True) -> Iterator[Any]:
    """`batches`, counted over every rank: rank 0 shows one bar of all `shard.units` batches of the run (none
    when not `enabled`). Each batch is counted once the caller has processed it (when it asks for the next);
    rank 0's bar follows the others until they are done too."""
    counter = GlobalCount(shard.ctx)
    bar = None
    if enabled and shard.ctx.is_main:
        from tqdm import tqdm

        bar = tqdm(total=shard.units, desc=desc, unit="batch", leave=False)
    try:
        for batch in batches:
            yield batch
            done = counter.add(1)
            if bar is not None:
                bar.update(done - bar.n)
        while bar is not None and bar.n < shard.units:
            time.sleep(POLL_SECONDS)
            bar.update(counter.add(0) - bar.n)
    finally:
        if bar is not None:
            bar.close()

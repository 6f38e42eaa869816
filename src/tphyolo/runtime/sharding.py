"""Dealing work out to the ranks of a distributed run, and putting the pieces back in one-process order: the one
invariant of every sharded run (distributed val and its losses, folder, video and raster prediction).

Work is a list of items cut into units: groups of consecutive items that one process handles together (a
batch of the one-process loader, a video, a raster's row of tiles). Unit k goes to rank k % world_size. So every
item is handled exactly once, by a rank anyone can compute from the units and the world size alone; ranks differ
by at most one unit; and a unit is the same group of items as in one process, so a batch holds the same images,
pads to the same shape and gives the same floats whatever the number of ranks. A rank may get nothing (more
ranks than units): it still joins every collective call. Results travel back to rank 0 as (index, value) pairs
and are put in index order (`merge_shards`): the one-process order, whatever the number of ranks.

`UnitDeal` deals the units a run has left (a resumed run's finished ones aside: `predict.runner.units`);
`Shard` deals items in units of a fixed size (val's batches).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tphyolo.runtime.distributed import DistContext, gather_to_main

T = TypeVar("T")
ONE_PROCESS = DistContext()


def fixed_units(count: int, size: int) -> list[range]:
    """`count` items cut into consecutive units of `size` (the last may be shorter)."""
    if size < 1:
        raise ValueError(f"a unit holds at least one item, got {size}")
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def deal(units: Sequence[T], *, rank: int, world_size: int) -> list[T]:
    """The units `rank` handles: unit k goes to rank k % world_size."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of {world_size} process(es)")
    return list(units[rank::world_size])


def merge_shards(shards: Iterable[Iterable[tuple[int, T]]], count: int) -> list[T]:
    """The values of the (index, value) pairs from every rank, in index order. Raises ValueError when an index
    of range(count) is missing, given twice, or out of range: a sharding bug must not pass as a result."""
    values: list[T | None] = [None] * count
    seen = [False] * count
    for pairs in shards:
        for index, value in pairs:
            if not 0 <= index < count:
                raise ValueError(f"index {index} is outside the {count} items")
            if seen[index]:
                raise ValueError(f"item {index} came back twice")
            seen[index], values[index] = True, value
    missing = [i for i, s in enumerate(seen) if not s]
    if missing:
        raise ValueError(f"{len(missing)} of {count} items did not come back (first: {missing[0]})")
    return values  # type: ignore[return-value]


@dataclass(frozen=True)
class UnitDeal(Generic[T]):
    """`count` units dealt to the ranks of `dist`: those `left` to run (all of them, or those a resume did not
    find finished) go to rank k % world_size by their position k among them; `mine` are this rank's, in order."""

    dist: DistContext
    count: int
    left: tuple[int, ...]
    mine: tuple[int, ...]

    @classmethod
    def of(cls, count: int, *, dist: DistContext = ONE_PROCESS, done: Sequence[int] = ()) -> UnitDeal:
        finished = set(done)
        left = tuple(k for k in range(count) if k not in finished)
        return cls(dist, count, left, tuple(deal(left, rank=dist.rank, world_size=dist.world_size)))

    def gather(
        self, values: Sequence[T], *, summary: Any = None, before: Mapping[int, T] | None = None
    ) -> tuple[list[T] | None, list[Any] | None]:
        """Every unit's value in unit order on rank 0, and every rank's `summary` (picklable: what a rank adds up
        beside its units, e.g. seconds spent) in rank order; (None, None) on the other ranks. Each rank gives the
        `values` of its units (`mine`, in order), rank 0 adds those of the units finished `before`. Raises
        ValueError when a unit comes back twice or not at all (a dealing bug must not pass as a result)."""
        if len(values) != len(self.mine):
            raise ValueError(f"rank {self.dist.rank}: {len(values)} results for {len(self.mine)} units")
        gathered = gather_to_main(self.dist, (list(zip(self.mine, values, strict=True)), summary))
        if gathered is None:
            return None, None
        pairs = [pairs for pairs, _ in gathered]
        return merge_shards([*pairs, list((before or {}).items())], self.count), [s for _, s in gathered]


@dataclass(frozen=True)
class Shard:
    """This rank's part of `count` items dealt in units of `unit` consecutive items (`Shard.of`): the `indices`
    of its items, ascending; `units`: the run's number of units, all ranks' (what a progress bar counts)."""

    ctx: DistContext
    count: int
    units: int
    indices: tuple[int, ...]

    @classmethod
    def of(cls, count: int, *, unit: int, ctx: DistContext) -> Shard:
        units = fixed_units(count, unit)
        mine = deal(units, rank=ctx.rank, world_size=ctx.world_size)
        return cls(ctx, count, len(units), tuple(i for items in mine for i in items))

    def gather(self, values: Sequence[T]) -> list[T] | None:
        """The values of every rank (this rank's `values` are those of `indices`, in order) as one list in item
        order, on rank 0; None on the other ranks."""
        if len(values) != len(self.indices):
            raise ValueError(f"rank {self.ctx.rank}: {len(values)} results for {len(self.indices)} items")
        gathered = gather_to_main(self.ctx, list(zip(self.indices, values, strict=True)))
        return None if gathered is None else merge_shards(gathered, self.count)

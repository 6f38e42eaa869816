"""Dealing work out to the ranks of a distributed run, and putting the pieces back in one-process order.

Work is a list of items cut into units: groups of consecutive items that one process handles together (a
batch of the one-process loader, a video). Unit k goes to rank k % world_size. So every item is handled exactly
once, by a rank anyone can compute from the units and the world size alone; ranks differ by at most one unit;
and a unit is the same group of items as in one process, so a batch holds the same images, pads to the same
shape and gives the same floats whatever the number of ranks. A rank may get nothing (more ranks than units):
it still joins every collective call.

Results travel back as (index, value) pairs and `merge_shards` orders them by index: the one-process order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")


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

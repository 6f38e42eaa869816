"""A rank's share of val's images (`Shard`): each image exactly once, in whole batches dealt as the runner deals
units, and the values gathered back in one-process order."""

from __future__ import annotations

import pytest

from tphyolo.runtime.distributed import DistContext
from tphyolo.runtime.sharding import Shard, merge_shards


def shard_indices(count: int, *, rank: int, world_size: int, unit: int = 1) -> list[int]:
    return list(Shard.of(count, unit=unit, ctx=DistContext(rank=rank, world_size=world_size)).indices)


@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
@pytest.mark.parametrize("unit", [1, 2, 4])
def test_every_item_once_in_whole_units_and_back_in_order(world_size, unit):
    for count in range(0, 23):
        items = [f"img{i}" for i in range(count)]
        shards = [[(i, items[i]) for i in shard_indices(count, rank=r, world_size=world_size, unit=unit)]
                  for r in range(world_size)]  # fmt: skip
        assert merge_shards(shards, count) == items
        sizes = [len(s) for s in shards]
        assert max(sizes) - min(sizes) <= unit
        units = [list(range(k, min(k + unit, count))) for k in range(0, count, unit)]
        for r, pairs in enumerate(shards):  # rank r holds units r, r + W, ... as they are in one process
            assert [i for i, _ in pairs] == [i for u in units[r::world_size] for i in u]


def test_seven_images_in_batches_of_two_over_two_ranks():
    assert shard_indices(7, rank=0, world_size=2, unit=2) == [0, 1, 4, 5]
    assert shard_indices(7, rank=1, world_size=2, unit=2) == [2, 3, 6]
    assert shard_indices(1, rank=1, world_size=2) == []  # a rank with nothing to do


def test_a_rank_with_nothing_to_do_and_a_short_result_list():
    empty = Shard.of(1, unit=1, ctx=DistContext(rank=1, world_size=2))
    assert (empty.indices, empty.units) == ((), 1)
    one = Shard.of(5, unit=2, ctx=DistContext())
    assert one.gather(list("abcde")) == list("abcde")
    with pytest.raises(ValueError, match="rank 0: 4 results for 5 items"):
        one.gather(list("abcd"))

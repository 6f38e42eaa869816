"""Sharding over ranks: each item exactly once, whole units (batches), back in one-process order."""

from __future__ import annotations

import pytest

from tphyolo.runtime.sharding import deal, fixed_units, merge_shards, shard_indices


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


def test_a_bad_merge_or_shard_is_refused():
    with pytest.raises(ValueError, match="item 1 came back twice"):
        merge_shards([[(0, "a"), (1, "b")], [(1, "b")]], 2)
    with pytest.raises(ValueError, match="1 of 3 items did not come back \\(first: 2\\)"):
        merge_shards([[(0, "a"), (1, "b")]], 3)
    with pytest.raises(ValueError, match="outside"):
        merge_shards([[(3, "a")]], 3)
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        shard_indices(4, rank=2, world_size=2)
    with pytest.raises(ValueError, match="at least one item"):
        shard_indices(4, rank=0, world_size=1, unit=0)


def test_units_of_any_shape_are_dealt_whole():
    units = [[0, 1, 2], [3], [4, 5], [6]]  # e.g. a batch of images, a video, ...
    assert deal(units, rank=0, world_size=3) == [[0, 1, 2], [6]]
    assert deal(units, rank=2, world_size=3) == [[4, 5]]
    assert fixed_units(5, 2) == [range(0, 2), range(2, 4), range(4, 5)] and fixed_units(0, 3) == []

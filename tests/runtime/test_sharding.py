"""Dealing units over ranks and merging what comes back into one-process order."""

from __future__ import annotations

import pytest

from tphyolo.runtime.sharding import deal, fixed_units, merge_shards


def test_a_bad_merge_or_shard_is_refused():
    with pytest.raises(ValueError, match="item 1 came back twice"):
        merge_shards([[(0, "a"), (1, "b")], [(1, "b")]], 2)
    with pytest.raises(ValueError, match="1 of 3 items did not come back \\(first: 2\\)"):
        merge_shards([[(0, "a"), (1, "b")]], 3)
    with pytest.raises(ValueError, match="outside"):
        merge_shards([[(3, "a")]], 3)
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        deal([1, 2], rank=2, world_size=2)
    with pytest.raises(ValueError, match="at least one item"):
        fixed_units(4, 0)


def test_units_of_any_shape_are_dealt_whole():
    units = [[0, 1, 2], [3], [4, 5], [6]]  # e.g. a batch of images, a video, ...
    assert deal(units, rank=0, world_size=3) == [[0, 1, 2], [6]]
    assert deal(units, rank=2, world_size=3) == [[4, 5]]
    assert fixed_units(5, 2) == [range(0, 2), range(2, 4), range(4, 5)] and fixed_units(0, 3) == []

"""The order of a training set, epoch by epoch: `EpochSampler` yields `SampleKey(index, epoch)`.

Every random choice about data is a function of the run's seed and the epoch, never of how many epochs this
process has run: the order of an epoch (and a process's share of it) comes from (seed, epoch), and the key
tells the dataset which epoch it draws for, so that its augmentation can depend on (seed, epoch, index) alone
(`DetectionDataset`). A run resumed at epoch e therefore sees the batches the uninterrupted run saw at epoch e,
whatever its loader workers drew before, persistent workers included (they never hear of `set_epoch`; the keys
reach them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from torch.utils.data import DistributedSampler, Sampler

from tphyolo.errors import InputError


class SampleKey(NamedTuple):
    """Which sample to draw: dataset `index`, augmented as in `epoch`."""

    index: int
    epoch: int


class EpochSampler(Sampler[SampleKey]):
    """The keys of process `rank`'s share (of `world_size`) of a dataset of `size` samples for the current epoch.

    shuffle: the order is a permutation drawn from (seed + epoch), as torch's DistributedSampler draws it, else
    the dataset's order; the share of `rank` is every `world_size`-th sample of that order, padded with the
    first ones to equal lengths (drop_last: the remainder is dropped instead). Call `set_epoch(epoch)` before
    each epoch: the seed and the epoch are all the state there is, so a checkpoint's epoch restores it.
    """

    def __init__(
        self, size: int, *, shuffle: bool, seed: int = 0, rank: int = 0, world_size: int = 1, drop_last: bool = False
    ) -> None:
        if not 0 <= rank < world_size:
            raise InputError(f"rank {rank} is not one of the {world_size} processes")
        self.size, self.shuffle, self.seed = size, shuffle, seed
        self.rank, self.world_size = rank, world_size
        self._order = DistributedSampler(
            range(size), num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last
        )
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order and augmentation the next iteration yields."""
        if epoch < 0:
            raise InputError(f"epoch must be >= 0, got {epoch}")
        self.epoch = epoch
        self._order.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[SampleKey]:
        epoch = self.epoch
        return (SampleKey(index, epoch) for index in self._order)

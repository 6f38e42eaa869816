"""Epochs of a loader: a loader started at epoch e yields what one that ran epochs 0..e-1 first yields at e.

This is what a resumed training run relies on: the order of an epoch and the augmentation of every sample are
functions of (seed, epoch, index), whichever worker draws them and however many epochs it drew before.
"""

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from tphyolo.data.augment import Hyp
from tphyolo.data.builtin.synthetic import generate_synthetic
from tphyolo.data.dataset import Sample
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.loader import (
    Batch,
    DatasetSettings,
    LoaderSettings,
    build_dataloader,
    build_dataset,
    set_loader_epoch,
)
from tphyolo.data.sampler import EpochSampler, SampleKey

HYP = Hyp(mixup=0.5, degrees=5, flipud=0.5)
EPOCHS = 4
RESUME_AT = 2


@pytest.fixture(scope="module")
def small_data(tmp_path_factory) -> Path:
    return generate_synthetic(tmp_path_factory.mktemp("syn"), n_train=6, n_val=2, imgsz=192, seed=5)


def _train_set(small_data):
    dataset, _ = build_dataset(
        load_data_config(small_data),
        "train",
        DatasetSettings(imgsz=64, augment=True, hyp=HYP, scan_cache=False, seed=3),
    )
    return dataset


def _epochs(loader, first: int) -> dict[int, list[Batch]]:
    out = {}
    for epoch in range(first, EPOCHS):
        set_loader_epoch(loader, epoch)
        out[epoch] = list(loader)
    return out


def _assert_same(a: list[Batch], b: list[Batch]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.paths == y.paths
        assert torch.equal(x.images, y.images) and torch.equal(x.targets, y.targets)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_loader_started_at_an_epoch_yields_the_uninterrupted_batches(small_data, workers):
    def loader():
        return build_dataloader(
            _train_set(small_data),
            LoaderSettings(batch_size=4, workers=workers, shuffle=True, seed=7, persistent_workers=True),
        )

    uninterrupted = _epochs(loader(), 0)
    resumed = _epochs(loader(), RESUME_AT)
    for epoch in range(RESUME_AT, EPOCHS):
        _assert_same(resumed[epoch], uninterrupted[epoch])
    # the epochs differ from each other (what a replay of epoch 0 at epoch 2 would not show otherwise)
    assert [b.paths for b in uninterrupted[0]] != [b.paths for b in uninterrupted[RESUME_AT]]
    assert not torch.equal(uninterrupted[0][0].images, uninterrupted[RESUME_AT][0].images)


def test_a_sample_does_not_depend_on_the_worker_count_or_the_global_generators(small_data):
    dataset = _train_set(small_data)
    key = SampleKey(index=1, epoch=5)
    first = dataset[key]
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    for _ in range(3):  # the dataset's other draws in between do not move this one
        dataset[SampleKey(0, 5)]
    again = dataset[key]
    assert torch.equal(first.image, again.image) and torch.equal(first.labels, again.labels)
    assert not torch.equal(dataset[SampleKey(1, 6)].image, first.image)
    dataset.set_epoch(5)
    assert torch.equal(dataset[1].image, first.image)  # a plain index draws for the dataset's epoch
    in_process = list(build_dataloader(dataset, LoaderSettings(batch_size=3, workers=0, shuffle=True, seed=2)))
    in_workers = list(build_dataloader(dataset, LoaderSettings(batch_size=3, workers=2, shuffle=True, seed=2)))
    _assert_same(in_process, in_workers)


class GlobalDraws(torch.utils.data.Dataset):
    """Returns what a worker's process-wide generators draw (for code in a worker that uses them)."""

    def __len__(self):
        return 4

    def __getitem__(self, key: SampleKey) -> Sample:
        drawn = [key.index, random.random(), float(np.random.random()), float(torch.rand(())), 0.0]
        return Sample(
            image=torch.zeros((3, 2, 2), dtype=torch.uint8), labels=torch.tensor([drawn]),
            ignore=torch.zeros((0, 4)), path=str(key.index), shape0=(2, 2), ratio=(1.0, 1.0), pad=(0, 0),
        )  # fmt: skip


def test_workers_started_for_an_epoch_are_seeded_from_it():
    def draws(epochs: list[int]) -> torch.Tensor:
        loader = build_dataloader(
            GlobalDraws(), LoaderSettings(batch_size=2, workers=2, seed=4)
        )  # workers started per epoch
        for epoch in epochs:
            set_loader_epoch(loader, epoch)
            drawn = torch.cat([batch.targets for batch in loader])
        return drawn

    uninterrupted = draws([0, 1, 2])
    assert torch.equal(draws([2]), uninterrupted)
    assert not torch.equal(draws([1]), uninterrupted)


def test_epoch_orders_shard_and_change_by_epoch():
    samplers = [EpochSampler(10, shuffle=True, seed=3, rank=r, world_size=2) for r in (0, 1)]
    orders = {}
    for epoch in (0, 1):
        shares = []
        for sampler in samplers:
            sampler.set_epoch(epoch)
            keys = list(sampler)
            assert {k.epoch for k in keys} == {epoch} and len(keys) == len(sampler) == 5
            shares.append([k.index for k in keys])
        assert sorted(shares[0] + shares[1]) == list(range(10))
        orders[epoch] = shares
    assert orders[0] != orders[1]
    assert [k.index for k in EpochSampler(5, shuffle=False)] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="epoch"):
        samplers[0].set_epoch(-1)
    with pytest.raises(ValueError, match="rank 2"):
        EpochSampler(4, shuffle=False, rank=2, world_size=2)

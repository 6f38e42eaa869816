"""DataLoader: Batch contents, 0 and 2 workers, reproducibility, sharding, multi-scale, image caches, how workers
start and a worker that hangs."""

import multiprocessing
import os
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from tphyolo.data import loader
from tphyolo.data.augment import Hyp
from tphyolo.data.builtin.synthetic import generate_synthetic
from tphyolo.data.dataset import DetectionDataset
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.files.image_cache import ImageCache
from tphyolo.data.loader import Batch, DatasetSettings, LoaderSettings, build_dataloader, build_dataset, multiscale_size
from tphyolo.errors import describe_error

HYP = Hyp(mixup=0.5, degrees=5, flipud=0.5)


@pytest.fixture(scope="module")
def small_data(tmp_path_factory) -> Path:
    return generate_synthetic(tmp_path_factory.mktemp("syn"), n_train=10, n_val=4, imgsz=256, seed=5)


def _batches(dataset, **kwargs) -> list[Batch]:
    return list(build_dataloader(dataset, LoaderSettings(batch_size=4, **kwargs)))


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_loader_batches_and_reproducibility(small_data, workers):
    cfg = load_data_config(small_data)
    dataset, scan = build_dataset(
        cfg, "train", DatasetSettings(imgsz=128, augment=True, hyp=HYP, scan_cache=False, seed=3)
    )
    first = _batches(dataset, workers=workers, shuffle=True, seed=7)
    assert [len(b) for b in first] == [4, 4, 2]
    for b in first:
        n = len(b)
        assert b.images.dtype == torch.uint8 and tuple(b.images.shape) == (n, 3, 128, 128)
        assert b.targets.shape[1] == 6 and b.targets.dtype == torch.float32
        assert set(b.targets[:, 0].long().tolist()) <= set(range(n))
        assert b.targets[:, 2:].min() >= 0 and b.targets[:, 2:].max() <= 1
        assert b.targets[:, 1].max() < len(cfg.names)
        assert len(b.ignore) == n and all(g.shape[1] == 4 for g in b.ignore)
        assert len(b.paths) == n and b.shapes0.tolist() == [[256, 256]] * n
        assert b.ratios.shape == (n, 2) and b.pads.shape == (n, 2)
    assert sum(len(b.targets) for b in first) > 20
    dataset2, _ = build_dataset(
        cfg, "train", DatasetSettings(imgsz=128, augment=True, hyp=HYP, scan_cache=False, seed=3)
    )
    again = _batches(dataset2, workers=workers, shuffle=True, seed=7)
    for a, b in zip(first, again, strict=True):
        assert a.paths == b.paths
        assert torch.equal(a.images, b.images) and torch.equal(a.targets, b.targets)


def test_rect_validation_batches_and_resize(small_data):
    cfg = load_data_config(small_data)
    dataset, _ = build_dataset(cfg, "val", DatasetSettings(imgsz=160, rect=True, batch_size=2, scan_cache=False))
    with pytest.raises(ValueError, match="rect"):
        build_dataloader(dataset, LoaderSettings(batch_size=2, shuffle=True))
    (batch, *_) = _batches(dataset)
    assert batch.images.shape[-2:] == (192, 192)  # ceil(160 / 32 + 0.5) strides; validation never upscales
    assert batch.ratios[0].tolist() == pytest.approx([160 / 256, 160 / 256])
    assert batch.pads[0].tolist() == [16, 16]
    half = batch.resized(96)
    assert tuple(half.images.shape[-2:]) == (96, 96)
    assert torch.equal(half.targets, batch.targets)
    assert half.ratios[0].tolist() == pytest.approx([0.5 * 160 / 256] * 2)
    if len(batch.ignore[0]):
        torch.testing.assert_close(half.ignore[0], batch.ignore[0] * 0.5)
    sizes = {multiscale_size(640, np.random.default_rng(i), stride=32) for i in range(50)}
    assert min(sizes) >= 320 and max(sizes) <= 960 and all(s % 32 == 0 for s in sizes)


def test_distributed_shards_are_disjoint(small_data):
    cfg = load_data_config(small_data)
    dataset, _ = build_dataset(cfg, "train", DatasetSettings(imgsz=64, scan_cache=False))
    shards = [
        [p for b in _batches(dataset, distributed=True, rank=r, world_size=2, shuffle=True) for p in b.paths]
        for r in (0, 1)
    ]
    assert len(shards[0]) == len(shards[1]) == 5
    assert sorted(shards[0] + shards[1]) == sorted(r.im_file for r in dataset.records)


def test_image_caches_equal_decoding_and_ram_refusal(small_data):
    cfg = load_data_config(small_data)
    plain, scan = build_dataset(cfg, "val", DatasetSettings(imgsz=96, scan_cache=False))
    for mode in ("ram", "disk"):
        cached = DetectionDataset(scan.records, imgsz=96, cache=mode)
        for i in range(len(plain)):
            assert torch.equal(cached[i].image, plain[i].image)
    assert (Path(scan.records[0].im_file).parent.parent / "images_cache96").is_dir()
    with pytest.raises(MemoryError, match="RAM image cache needs"):
        ImageCache(["x.jpg"] * 10, [(10**6, 10**6)] * 10, imgsz=10**6, mode="ram", augment=False)


def test_workers_are_capped_at_the_cores_and_the_batch_and_said(small_data, monkeypatch, caplog):
    """--workers 32 on a 2-core machine started 33 processes; YOLOv5's rule caps them (cores per process,
    batch), and the log says so."""
    monkeypatch.setattr(loader, "available_cores", lambda: 2)
    caplog.set_level("INFO", logger="tphyolo")
    assert loader.usable_workers(32, batch_size=8) == 2
    assert "data loader: 32 worker(s) asked, 2 started (2 CPU core(s) per process, batch 8)" in caplog.text
    assert loader.usable_workers(32, batch_size=1) == 1 and loader.usable_workers(0, batch_size=8) == 0
    assert loader.usable_workers(4, batch_size=8, world_size=4) == 1  # 2 cores shared by 4 processes
    caplog.clear()
    assert loader.usable_workers(2, batch_size=8) == 2 and not caplog.text
    dataset, _ = build_dataset(load_data_config(small_data), "val", DatasetSettings(imgsz=64, batch_size=2))
    assert build_dataloader(dataset, LoaderSettings(batch_size=2, workers=32)).num_workers == 2


def test_a_split_without_usable_images_is_named(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "empty.jpg").write_bytes(b"")
    (tmp_path / "data.yaml").write_text(f"path: {tmp_path}\ntrain: images\nval: images\nnames: [a]\n")
    with pytest.raises(ValueError) as error:
        build_dataset(load_data_config(tmp_path / "data.yaml"), "val", DatasetSettings(scan_cache=False))
    assert str(error.value).startswith(f"{tmp_path / 'images'}: no usable images in the 'val' split (1 images: ")


def _without_threaded_runtimes(monkeypatch) -> None:
    for name in loader.THREADED_RUNTIMES:
        monkeypatch.delitem(sys.modules, name, raising=False)


def test_loaders_start_workers_from_a_fork_server_beside_a_threaded_runtime(small_data, monkeypatch):
    """Workers forked after a compiled runtime's threads started (OpenVINO, loaded by `--runtime auto`) could wait
    forever for a lock one of those threads held: every loader forked. Once such a runtime is loaded, a loader
    starts its workers from a fork server; before, it forks (training, PyTorch inference)."""
    dataset, _ = build_dataset(load_data_config(small_data), "val", DatasetSettings(imgsz=64, batch_size=2))

    def start_method(workers: int = 2) -> str | None:
        context = build_dataloader(dataset, LoaderSettings(batch_size=2, workers=workers)).multiprocessing_context
        return None if context is None else context.get_start_method()

    _without_threaded_runtimes(monkeypatch)
    assert start_method() is None  # torch's default: fork
    monkeypatch.setitem(sys.modules, "openvino", types.ModuleType("openvino"))  # a compiled model was loaded
    assert start_method() == "forkserver" and start_method(workers=0) is None


class _StuckDataset(torch.utils.data.Dataset):
    """The samples of `dataset`, each given only once `release` is set: a worker that stops answering until then."""

    def __init__(self, dataset: DetectionDataset, release) -> None:
        self.dataset, self.release = dataset, release

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index):
        self.release.wait(60)
        return self.dataset[index]


def test_a_worker_that_stops_answering_ends_the_run_in_one_line(small_data, monkeypatch):
    """A loader waited forever for a hung worker; after its timeout it raises a TimeoutError (an OSError: the
    command line's one-line error) naming the loader and the way out."""
    _without_threaded_runtimes(monkeypatch)
    monkeypatch.setattr(loader, "WORKER_POLL_S", 0.2)  # three polls before the timeout
    dataset, _ = build_dataset(load_data_config(small_data), "val", DatasetSettings(imgsz=64))
    release = multiprocessing.get_context("fork").Event()
    batches = iter(build_dataloader(_StuckDataset(dataset, release), LoaderSettings(batch_size=1, workers=1,
                                                                                    timeout=0.5)))  # fmt: skip
    try:
        with pytest.raises(TimeoutError) as error:
            next(batches)
    finally:
        release.set()  # the worker answers now and ends with the loader
    assert describe_error(error.value) == str(error.value)
    assert str(error.value) == (
        "_StuckDataset: the data loader got no batch from its 1 worker process(es) in 0.5 s (a worker hangs); "
        "--workers 0 reads in the main process"
    )


def test_a_worker_slower_than_a_poll_gives_its_batch(small_data, monkeypatch):
    """Polling for dead workers does not cut a slow worker short: the batch waited for across polls comes."""
    _without_threaded_runtimes(monkeypatch)
    monkeypatch.setattr(loader, "WORKER_POLL_S", 0.05)
    dataset, _ = build_dataset(load_data_config(small_data), "val", DatasetSettings(imgsz=64))
    release = multiprocessing.get_context("fork").Event()
    batches = build_dataloader(_StuckDataset(dataset, release), LoaderSettings(batch_size=4, workers=1, timeout=60))
    timer = threading.Timer(0.5, release.set)
    timer.start()
    try:
        assert [batch.paths for batch in batches] == [[r.im_file for r in dataset.records]]
    finally:
        timer.cancel()
        release.set()


class _DyingDataset(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> torch.Tensor:
        os._exit(3)


@pytest.mark.slow
def test_a_worker_of_the_fork_server_that_dies_is_reported_before_the_timeout(monkeypatch):
    """A fork server's worker is not this process's child (no SIGCHLD): torch finds it dead only when a wait for a
    batch times out, so a loader polls (`WORKER_POLL_S`) instead of waiting its whole timeout at once."""
    monkeypatch.setitem(sys.modules, "openvino", types.ModuleType("openvino"))
    monkeypatch.setattr(loader, "WORKER_POLL_S", 0.5)
    batches = build_dataloader(_DyingDataset(), LoaderSettings(batch_size=1, workers=1, timeout=60))
    assert batches.multiprocessing_context.get_start_method() == "forkserver"
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        next(iter(batches))

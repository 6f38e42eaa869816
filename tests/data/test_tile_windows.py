"""Training on tiles (`TileWindows` in a `DetectionDataset`): windows at the image's own resolution, cut by the rule
`tphyolo data slice` uses, drawn from (seed, epoch, index) alone.

Before training on tiles, a sample was its whole image resized to the training size: every test here fails on it
(the pixels are resized, cut objects are never ignore regions, an epoch holds one sample per image).
"""

from pathlib import Path

import cv2
import numpy as np
import pytest

from tphyolo.data.augment import NO_AUGMENT
from tphyolo.data.dataset import DetectionDataset
from tphyolo.data.labels import ImageLabels
from tphyolo.data.loader import LoaderSettings, build_dataloader, set_loader_epoch
from tphyolo.data.sampler import SampleKey
from tphyolo.data.scan import Record
from tphyolo.data.tile_settings import DEFAULT_MIN_VISIBLE
from tphyolo.data.tiles import TileWindows, tile_labels

TILE = 64


def _image(path: Path, h: int, w: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    cv2.imwrite(str(path), rng.integers(0, 256, (h, w, 3), dtype=np.uint8))  # png: lossless
    return path


def _records(tmp_path: Path) -> list[Record]:
    """Two images larger than a tile (many objects, some of them large enough to be cut) and one smaller."""
    records = []
    for i, (h, w) in enumerate(((150, 230), (200, 170), (40, 50))):
        rng = np.random.default_rng(i)
        n = 12 if h > TILE else 1
        xy = rng.uniform(0, [w - 30, h - 30], (n, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(8, 30, (n, 2))], axis=1).astype(np.float32)
        labels = ImageLabels(rng.integers(0, 3, n), boxes, np.array([[2, 2, 20, 20]], np.float32))
        records.append(Record(str(_image(tmp_path / f"im{i}.png", h, w, i)), None, h, w, labels, "found"))
    return records


def test_a_window_is_cut_from_the_full_image_and_never_resized(tmp_path):
    records = _records(tmp_path)
    for augment in (False, True):  # augmented without augmentation (NO_AUGMENT): the same pixels
        data = DetectionDataset(records, imgsz=TILE, augment=augment, hyp=NO_AUGMENT, tile=TILE, ignore_mode="keep")
        for k in range(len(data.tiles.owner) - 1):  # the last window is the small image's
            window = data.tiles.window(k, 3)
            x1, y1, x2, y2 = window.tile
            full = cv2.imread(records[window.image].im_file)
            sample = data[SampleKey(k, 3)]
            assert (x2 - x1, y2 - y1) == (TILE, TILE)
            np.testing.assert_array_equal(sample.image.numpy().transpose(1, 2, 0), full[y1:y2, x1:x2, ::-1])


def test_an_image_smaller_than_the_tile_is_one_window_letterboxed(tmp_path):
    data = DetectionDataset(_records(tmp_path), imgsz=TILE, augment=False, tile=TILE)
    last = len(data) - 1
    assert data.tiles.window(last, 0).tile == (0, 0, 50, 40)
    assert tuple(data[last].image.shape) == (3, TILE, TILE)


def test_an_epoch_holds_the_tiles_of_its_images_side_by_side(tmp_path):
    data = DetectionDataset(_records(tmp_path), imgsz=TILE, augment=True, tile=TILE)
    assert len(data) == 4 * 3 + 4 * 3 + 1  # ceil(230/64) x ceil(150/64), ceil(170/64) x ceil(200/64), one
    assert "25 windows of 64 px per epoch from 3 images" in data.tiles.describe()


def test_objects_cut_by_the_window_edge_follow_the_shared_rule(tmp_path):
    records = _records(tmp_path)
    data = DetectionDataset(records, imgsz=TILE, augment=False, tile=TILE, ignore_mode="keep")
    cut = 0
    for epoch in range(4):
        for k in range(len(data)):
            window = data.tiles.window(k, epoch)
            expected = tile_labels(records[window.image].labels, window.tile, min_visible=DEFAULT_MIN_VISIBLE)
            np.testing.assert_array_equal(window.labels.classes, expected.classes)
            np.testing.assert_allclose(window.labels.boxes, expected.boxes)
            np.testing.assert_allclose(window.labels.ignore, expected.ignore)
            if k == len(data) - 1:
                continue  # the small image, letterboxed: its pixels move
            sample = data[SampleKey(k, epoch)]
            np.testing.assert_allclose(sample.ignore.numpy(), expected.ignore, atol=1e-4)
            cut += len(expected.ignore) - int(_visible_part(records[window.image].labels.ignore, window.tile))
    assert cut > 0  # some objects were cut to less than half, and became ignore regions


def _visible_part(regions: np.ndarray, tile) -> int:
    """How many of the image's own ignore regions reach into `tile`."""
    x1, y1, x2, y2 = tile
    return int(((regions[:, 0] < x2) & (regions[:, 2] > x1) & (regions[:, 1] < y2) & (regions[:, 3] > y1)).sum())


def test_empty_windows_are_bounded_and_most_lie_around_objects(tmp_path):
    h = w = 640
    labels = [ImageLabels([0], np.array([[300, 300, 310, 310]], np.float32))] * 4  # one tiny object in a field
    windows = TileWindows([(h, w)] * 4, labels, size=TILE, seed=0, empty_ratio=0.1)
    empty = [not len(windows.window(k, e).labels.classes) for e in range(3) for k in range(len(windows))]
    assert len(windows) == 4 * 100
    assert 0 < np.mean(empty) <= 0.1  # anywhere, it would be empty 99 times in 100


def test_the_windows_of_an_epoch_do_not_depend_on_the_epochs_before(tmp_path):
    """A run resumed at epoch 2 draws the windows and samples that the uninterrupted run drew at epoch 2."""
    records = _records(tmp_path)

    def batches(epochs: list[int]) -> list:
        data = DetectionDataset(records, imgsz=TILE, augment=True, tile=TILE, seed=5)
        loader = build_dataloader(data, LoaderSettings(batch_size=5, shuffle=True, seed=5))
        seen = []
        for epoch in epochs:
            set_loader_epoch(loader, epoch)
            seen = [(b.images.clone(), b.targets.clone()) for b in loader]
        return seen

    uninterrupted, resumed = batches([0, 1, 2]), batches([2])
    assert len(uninterrupted) == len(resumed) == 5
    for (images, targets), (images2, targets2) in zip(uninterrupted, resumed, strict=True):
        assert torch_equal(images, images2) and torch_equal(targets, targets2)
    other = DetectionDataset(records, imgsz=TILE, tile=TILE, seed=5).tiles
    assert [other.window(k, 1).tile for k in range(24)] != [other.window(k, 2).tile for k in range(24)]


def torch_equal(a, b) -> bool:
    return a.shape == b.shape and bool((a == b).all())


def test_the_image_cache_holds_full_images_once(tmp_path):
    records = _records(tmp_path)
    data = DetectionDataset(records, imgsz=TILE, augment=True, tile=TILE, cache="ram")
    assert [data.image_cache.get(i).shape[:2] for i in range(3)] == [(150, 230), (200, 170), (40, 50)]
    assert len(data.image_cache._images) == len(records)


def test_tiles_and_rect_batches_do_not_mix(tmp_path):
    from tphyolo.data.dataset import RectBatches

    with pytest.raises(ValueError, match="not with rect"):
        DetectionDataset(_records(tmp_path), imgsz=TILE, tile=TILE, rect=RectBatches(2))

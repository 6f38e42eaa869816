"""Crops map to the right pixels of the original image, in every label format; context and border clipping."""

import numpy as np
import pytest
from painted_scene import BACKGROUND, GREEN, HEIGHT, NAMES, RED, WIDTH, painted_image

from tphyolo.classify.crops import (
    context_regions,
    crop_objects,
    extract_crops,
    extract_patches,
    pixel_bounds,
    selected_objects,
)
from tphyolo.classify.dataset import NO_AUGMENT, CropAugment, CropSetDataset, PatchDataset, jitter_box
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.scan import Record, scan_split


def _records(data_yaml):
    cfg = load_data_config(data_yaml)
    return scan_split(cfg.train, names=cfg.names, cache=False).records


def test_context_grows_each_side_by_a_fraction_of_the_box_and_clips_at_the_border():
    boxes = np.array([[40, 30, 80, 70], [170, 110, 200, 150], [0, 0, 10, 20]], np.float32)
    regions = context_regions(boxes, context=0.25, width=WIDTH, height=HEIGHT)
    np.testing.assert_allclose(regions[0], [30, 20, 90, 80])
    np.testing.assert_allclose(regions[1], [162.5, 100, 200, 150])  # right and bottom clipped
    np.testing.assert_allclose(regions[2], [0, 0, 12.5, 25])  # left and top clipped
    np.testing.assert_allclose(context_regions(boxes, context=0, width=WIDTH, height=HEIGHT), boxes)


def test_pixel_bounds_round_outward_but_ignore_float_noise():
    assert pixel_bounds(np.array([10.4, 5.0, 20.2, 15.0]), width=100, height=100) == (10, 5, 21, 15)
    assert pixel_bounds(np.array([39.99999, 30.00001, 80.00001, 69.99999]), width=100, height=100) == (40, 30, 80, 70)
    assert pixel_bounds(np.array([99.9, 0, 100, 0.2]), width=100, height=100) == (99, 0, 100, 1)


def test_crop_of_the_painted_scene_holds_the_object_where_the_context_puts_it():
    image, labels = painted_image()
    red, green = crop_objects(image, labels.boxes[:2], context=0.25, size=30)
    # red: box 40x40 at (40, 30) -> region (30, 20)-(90, 80), 60 px -> 30 px: object at [5:25, 5:25]
    assert (red[5:25, 5:25] == RED).all()
    assert (red[:5] == BACKGROUND).all() and (red[25:] == BACKGROUND).all()
    assert (red[:, :5] == BACKGROUND).all() and (red[:, 25:] == BACKGROUND).all()
    # green touches the right and bottom border: its crop is clipped there, so it reaches the crop's edges
    # region (162.5, 100)-(200, 150) -> pixels x 162..199, y 100..149, 38 x 50 -> 30 x 30
    assert (green[-1, 8:] == GREEN).all() and (green[8:, -1] == GREEN).all()
    assert (green[:5, :] == BACKGROUND).all()  # 10 context rows above of 50 -> top 6 crop rows
    assert (green[:, :5] == BACKGROUND).all()  # 7.5 context columns of 38 -> left ~6 crop columns
    assert (green[10:, 8:] == GREEN).all()


def test_extracted_crops_are_the_same_in_every_label_format(painted_data):
    records = _records(painted_data)
    assert len(records) == 1
    crops = extract_crops(records, [NAMES.index("red"), NAMES.index("green"), NAMES.index("blue")],
                          context=0.25, size=30)  # fmt: skip
    # the 3 px blue object is below the minimum size and the blue ignore region is never a crop
    assert len(crops) == 2 and crops.labels.tolist() == [0, 1]
    assert crops.files == (records[0].im_file,) * 2
    image, labels = painted_image()
    expected = crop_objects(image, labels.boxes[:2], context=0.25, size=30)
    np.testing.assert_array_equal(crops.crops, expected)
    assert not (crops.crops == (255, 0, 0)).all(-1).any()  # no blue pixel anywhere


def test_min_size_and_class_selection():
    _, labels = painted_image()
    record = Record("unused.png", None, HEIGHT, WIDTH, labels, "found")
    boxes, picked = selected_objects(record, [3, 2], min_side=4)
    assert picked.tolist() == [1] and boxes.tolist() == [[170, 110, 200, 150]]  # blue (3 px) skipped
    boxes, picked = selected_objects(record, [3, 2], min_side=3)
    assert sorted(picked.tolist()) == [0, 1]


def test_patches_keep_the_object_box_in_patch_pixels(painted_data):
    patches = extract_patches(_records(painted_data), [1, 2], margin=0.5, max_side=1000)
    red, green = patches
    x1, y1, x2, y2 = red.box.round().astype(int)
    assert red.pixels.shape == (80, 80, 3) and (x1, y1, x2, y2) == (20, 20, 60, 60)
    assert (red.pixels[y1:y2, x1:x2] == RED).all() and (red.pixels[: y1 - 1] == BACKGROUND).all()
    assert green.pixels.shape == (60, 45, 3)  # clipped at the right and bottom border
    x1, y1, x2, y2 = green.box.round().astype(int)
    assert (green.pixels[y1:y2, x1:x2] == GREEN).all() and (x2, y2) == (45, 60)
    small = extract_patches(_records(painted_data), [1], margin=0.5, max_side=40)[0]
    assert small.pixels.shape == (40, 40, 3)
    np.testing.assert_allclose(small.box, [10, 10, 30, 30], atol=1e-3)


def test_unaugmented_patch_crop_equals_the_inference_crop(painted_data):
    records = _records(painted_data)
    patches = extract_patches(records, [1, 2], margin=CropAugment().margin(0.25), max_side=1000)
    dataset = PatchDataset(patches, size=30, context=0.25, augment=NO_AUGMENT)
    reference = CropSetDataset(extract_crops(records, [1, 2], context=0.25, size=30))
    for i in range(2):
        (a, la), (b, lb) = dataset[i], reference[i]
        assert la == lb and a.dtype == b.dtype and a.shape == (3, 30, 30)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert (reference[0][0][:, 10, 10].numpy() == RED[::-1]).all()  # RGB order


def test_augmented_crops_vary_by_epoch_but_not_by_call(painted_data):
    patches = extract_patches(_records(painted_data), [1, 2], margin=CropAugment().margin(0.1), max_side=1000)
    dataset = PatchDataset(patches, size=32, context=0.1, augment=CropAugment(), seed=3)
    first = dataset[0][0].clone()
    assert (dataset[0][0] == first).all()
    dataset.set_epoch(1)
    assert not (dataset[0][0] == first).all()
    # the object stays the main content: a red-dominant centre whatever the jitter
    for epoch in range(5):
        dataset.set_epoch(epoch)
        centre = dataset[0][0][:, 12:20, 12:20].float().mean((1, 2))  # (3,) RGB
        assert centre[0] > 2 * centre[1] and centre[0] > 2 * centre[2]


@pytest.mark.parametrize("context", [0.0, 0.1, 0.5])
def test_patch_margin_holds_every_jittered_context_region(context):
    augment = CropAugment(scale=0.2, translate=0.15)
    box = np.array([100, 200, 140, 220], np.float32)  # 40 x 20
    margin = augment.margin(context)
    limit = context_regions(box[None], context=margin, width=10**4, height=10**4)[0]
    rng = np.random.default_rng(0)
    regions = np.stack([jitter_box(box, augment, rng) for _ in range(2000)])
    regions = context_regions(regions, context=context, width=10**4, height=10**4)
    assert (regions[:, :2] >= limit[:2] - 1e-3).all() and (regions[:, 2:] <= limit[2:] + 1e-3).all()
    # and the margin is not wasted: the extreme draws come close to it
    assert regions[:, 0].min() < limit[0] + 0.1 * 40 and regions[:, 3].max() > limit[3] - 0.1 * 20

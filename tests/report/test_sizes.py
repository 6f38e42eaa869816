"""Size buckets and the one matching the report reads: bucket edges, the bucket rule for detections, and ignore
regions and crowd objects treated as each protocol treats them."""

import math

import numpy as np
import pytest
import torch

from tphyolo.metrics.protocol import ImageResult
from tphyolo.report.matching import match_image
from tphyolo.report.sizes import BUCKET_LABELS, bucket_index, bucket_label, size_table


def _image(boxes, classes, detections, *, ignore=(), crowd=None, shape=(200, 200)) -> ImageResult:
    return ImageResult(
        path="a.jpg",
        shape=shape,
        detections=torch.tensor(detections, dtype=torch.float32).reshape(-1, 6),
        classes=torch.tensor(classes, dtype=torch.int64),
        boxes=torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
        ignore=torch.tensor(ignore, dtype=torch.float32).reshape(-1, 4),
        crowd=None if crowd is None else torch.tensor(crowd),
    )


def test_bucket_edges_by_sqrt_area():
    sides = np.array([7.9, 8.0, 15.9, 16.0, 31.9, 32.0, 95.9, 96.0, 500.0])
    boxes = np.stack([np.zeros_like(sides), np.zeros_like(sides), sides, sides], 1)
    assert bucket_index(boxes).tolist() == [0, 1, 1, 2, 2, 3, 3, 4, 4]
    # each object is listed under the label that names its size
    labels = [BUCKET_LABELS[i] for i in bucket_index(boxes)]
    assert labels == ["<8", "8-16", "8-16", "16-32", "16-32", "32-96", "32-96", ">96", ">96"]


def test_bucket_labels_name_their_edges():
    assert [bucket_label(b) for b in ((0, 5), (4, 12.5), (50, math.inf))] == ["<5", "4-12.5", ">50"]


def test_bucket_edges_use_the_area_not_the_long_side():
    assert bucket_index(np.array([[0, 0, 4, 64]])).tolist() == [2]  # 64 px long, sqrt(4 * 64) = 16


def test_detections_count_in_the_bucket_of_the_object_they_found():
    """Object A is 10 px (8-16), B 40 px (32-96). A 30-px detection finds B (IoU 0.56): a true positive of 32-96
    only, not a false positive of 16-32. A 10-px detection that finds nothing is a false positive of 8-16 scoring
    above A's true positive, so 8-16 has AP 0.5 (precision 1/2 at recall 1)."""
    image = _image(
        [[0, 0, 10, 10], [100, 100, 140, 140]],
        [0, 0],
        [[50, 0, 60, 10, 0.95, 0], [0, 0, 10, 10, 0.9, 0], [105, 105, 135, 135, 0.5, 0]],
    )
    table = size_table([match_image(image, nc=1, protocol="yolo")], ["thing"])
    assert table.overall["8-16"].ap50 == pytest.approx(0.5)
    assert table.overall["8-16"].recall == 1.0
    assert table.overall["32-96"].ap50 == pytest.approx(1.0)
    assert table.overall["16-32"].objects == 0 and table.overall["16-32"].ap50 is None
    assert table.overall["all"].objects == 2 and table.overall["all"].found == 2
    assert table.overall["all"].ap50 == pytest.approx(2 / 3)  # FP, TP, TP: the envelope is 2/3 up to recall 1


def test_a_detection_of_another_class_is_a_false_positive():
    image = _image([[0, 0, 20, 20]], [0], [[0, 0, 20, 20, 0.9, 1]])
    match = match_image(image, nc=2, protocol="yolo")
    assert match.gt_detection.tolist() == [-1] and match.false_positive.tolist() == [True]
    assert match.misses(0.25).tolist() == [True]


@pytest.mark.parametrize(
    ("protocol", "object_counted", "detection_ignored"),
    [("yolo", True, False), ("coco", True, True), ("visdrone", False, True)],
)
def test_ignore_regions_follow_the_protocol(protocol, object_counted, detection_ignored):
    """An object and a false detection both inside an ignore region: YOLO ignores nothing; COCO keeps the
    object but ignores the detection; VisDrone removes both."""
    image = _image(
        [[10, 10, 30, 30]],
        [0],
        [[40, 40, 60, 60, 0.9, 0]],
        ignore=[[0, 0, 100, 100]],
    )
    match = match_image(image, nc=1, protocol=protocol)
    assert match.gt_counted.tolist() == [object_counted]
    assert match.det_ignored.tolist() == [detection_ignored]
    assert match.false_positive.tolist() == [not detection_ignored]


@pytest.mark.parametrize("protocol", ["coco", "visdrone"])
def test_crowd_objects_are_neither_hit_nor_miss(protocol):
    image = _image([[0, 0, 20, 20], [50, 50, 90, 90]], [0, 0], [[52, 52, 88, 88, 0.9, 0]], crowd=[False, True])
    match = match_image(image, nc=1, protocol=protocol)
    assert match.gt_counted.tolist() == [True, False]
    assert match.det_ignored.tolist() == [True]
    assert match.misses(0.25).tolist() == [True, False]
    table = size_table([match], ["thing"])
    assert table.overall["all"].objects == 1 and table.overall["all"].found == 0


def test_crowd_objects_count_under_yolo():
    image = _image([[50, 50, 90, 90]], [0], [[52, 52, 88, 88, 0.9, 0]], crowd=[True])
    match = match_image(image, nc=1, protocol="yolo")
    assert match.gt_counted.tolist() == [True] and match.gt_detection.tolist() == [0]


def test_the_highest_score_takes_the_object_first():
    image = _image([[0, 0, 20, 20]], [0], [[1, 1, 21, 21, 0.3, 0], [0, 0, 19, 19, 0.8, 0]])
    match = match_image(image, nc=1, protocol="yolo")
    assert match.det_rows[:, 4].tolist() == pytest.approx([0.8, 0.3])  # by descending score
    assert match.det_object.tolist() == [0, -1]
    assert match.misses(0.9).tolist() == [True]  # found only below 0.9
    assert match.misses(0.5).tolist() == [False]

"""One rule for "this box lies in an ignored region" (the VisDrone toolkit's dropObjectsInIgr), and its three
callers (detection scoring, tracking benchmarks, the report's matching) against a dense transcription of it, on
fractional boxes at the region edges where a continuous-area rule decides otherwise."""

from dataclasses import dataclass

import numpy as np
import torch

from tphyolo.data.mot.table import TrackTable
from tphyolo.metrics.ignored import in_ignored_regions
from tphyolo.metrics.protocol import IgnoreRules, ImageResult
from tphyolo.metrics.registry import PROTOCOLS
from tphyolo.metrics.track_protocols import drop_in_regions
from tphyolo.metrics.visdrone import drop_in_ignored
from tphyolo.report.matching import match_image

HEIGHT, WIDTH = 60, 80
REGION = np.array([[20.0, 10.0, 20.0, 30.0]])  # xywh


def _matlab_round(x: float) -> int:
    return int(np.sign(x) * np.floor(abs(x) + 0.5))


def _dense_rule(boxes: np.ndarray, regions: np.ndarray, height: int, width: int) -> np.ndarray:
    """The toolkit's steps written out: a full image-size mask of the rounded regions, its integral image, and
    each rounded box's corners read from it."""
    mask = np.zeros((height, width))
    for region in regions:
        x, y, w, h = (_matlab_round(v) for v in np.maximum(1, region))
        mask[y - 1 : min(height, y + h), x - 1 : min(width, x + w)] = 1
    integral = mask.cumsum(0).cumsum(1)
    inside = []
    for box in boxes:
        x, y, w, h = (max(1, _matlab_round(v)) for v in box)
        x, y = min(x, width), min(y, height)
        x2, y2 = min(width, x + w), max(1, min(height, y + h))
        covered = integral[y - 1, x - 1] + integral[y2 - 1, x2 - 1] - integral[y - 1, x2 - 1] - integral[y2 - 1, x - 1]
        inside.append(not covered / (w * h) < 0.5)
    return np.array(inside, dtype=bool)


def _continuous_rule(boxes: np.ndarray, region: np.ndarray) -> np.ndarray:
    """Half of the box's real area inside the region's real extent (the rule the toolkit does not use)."""
    w = np.minimum(boxes[:, 0] + boxes[:, 2], region[0] + region[2]) - np.maximum(boxes[:, 0], region[0])
    h = np.minimum(boxes[:, 1] + boxes[:, 3], region[1] + region[3]) - np.maximum(boxes[:, 1], region[1])
    return np.clip(w, 0, None) * np.clip(h, 0, None) / (boxes[:, 2] * boxes[:, 3]) >= 0.5


def _edge_boxes() -> np.ndarray:
    """Boxes whose sides fall at fractions of a pixel around the region's edges."""
    rng = np.random.default_rng(3)
    x = 20 - 8 + rng.choice([0.0, 0.3, 0.5, 0.7, 1.5], 200) + rng.integers(-2, 3, 200)
    y = rng.uniform(12, 25, 200).round(1)
    w = 16 + rng.choice([0.2, 0.5, 0.8], 200)
    h = rng.choice([4.5, 5.0, 6.4], 200)
    return np.column_stack([x, y, w, h])


def test_edge_boxes_are_where_the_rules_differ():
    boxes = _edge_boxes()
    pixel = _dense_rule(boxes, REGION, HEIGHT, WIDTH)
    assert (pixel != _continuous_rule(boxes, REGION[0])).sum() >= 10
    assert 20 <= pixel.sum() <= 180  # both outcomes occur


def test_the_rule_equals_the_dense_transcription():
    boxes = _edge_boxes()
    regions = np.vstack([REGION, [[55.5, 0.4, 30.0, 70.0]]])  # the second one crosses the image's corner
    for size in ((HEIGHT, WIDTH), (45, 70)):
        np.testing.assert_array_equal(in_ignored_regions(boxes, regions, height=size[0], width=size[1]),
                                      _dense_rule(boxes, regions, *size))  # fmt: skip


def test_detection_scoring_drops_by_the_rule():
    boxes = _edge_boxes()
    want = _dense_rule(boxes, REGION, HEIGHT, WIDTH)
    rows = np.column_stack([boxes, np.ones(len(boxes)), np.full(len(boxes), 4.0), np.arange(len(boxes))])
    gt = np.vstack([np.concatenate([REGION[0], [1.0, 0.0, -1]]), rows])
    kept_gt, kept_det = drop_in_ignored(gt, rows, height=HEIGHT, width=WIDTH)
    np.testing.assert_array_equal(kept_gt[:, 6], np.flatnonzero(~want))
    np.testing.assert_array_equal(kept_det[:, 6], np.flatnonzero(~want))


def test_tracking_benchmarks_drop_by_the_rule():
    boxes = _edge_boxes()
    xyxy = np.concatenate([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], axis=1)
    frames = np.arange(len(boxes)) % 3 + 1
    table = TrackTable.from_columns(frames, np.arange(len(boxes)) + 1, xyxy, np.ones(len(boxes)))
    region = np.concatenate([REGION[:, :2], REGION[:, :2] + REGION[:, 2:]], axis=1)
    regions = TrackTable.from_columns([1, 2, 3], [-1, -1, -1], np.repeat(region, 3, axis=0), np.ones(3))
    kept = drop_in_regions(table, regions)
    want = _dense_rule(boxes, REGION, 1000, 1000)  # no frame size in the files: nothing is clipped
    np.testing.assert_array_equal(kept.ids, np.flatnonzero(~want) + 1)
    kept = drop_in_regions(table, regions, image_size=(HEIGHT, WIDTH))
    np.testing.assert_array_equal(kept.ids, np.flatnonzero(~_dense_rule(boxes, REGION, HEIGHT, WIDTH)) + 1)


def test_the_report_ignores_by_the_rule():
    boxes = _edge_boxes()
    want = _dense_rule(boxes, REGION, HEIGHT, WIDTH)
    xywh = torch.from_numpy(boxes)
    scores = torch.linspace(0.9, 0.1, len(boxes), dtype=torch.float64)
    detections = torch.cat([xywh, scores[:, None], torch.zeros(len(boxes), 1, dtype=torch.float64)], dim=1)
    # objects of class 1, detections of class 0: none is taken, so a detection is ignored only by the regions
    image = ImageResult("a.jpg", (HEIGHT, WIDTH), detections, torch.full((len(boxes),), 1), xywh,
                        torch.from_numpy(REGION), box_format="xywh")  # fmt: skip
    match = match_image(image, nc=2, protocol="visdrone")
    np.testing.assert_array_equal(match.gt_counted, ~want)
    np.testing.assert_array_equal(match.det_ignored, want)  # detections come by descending score: file order


def test_every_protocol_answers_for_its_rules():
    for name, protocol in PROTOCOLS.items():
        assert isinstance(protocol.ignore_rules, IgnoreRules), name
        assert isinstance(protocol.yolo_metrics, bool), name
    assert [name for name, p in PROTOCOLS.items() if p.yolo_metrics] == ["yolo"]
    assert PROTOCOLS["visdrone"].ignore_rules.drop_in_regions and not PROTOCOLS["coco"].ignore_rules.drop_in_regions


def test_the_report_asks_the_protocol_object_not_its_name():
    @dataclass
    class RegionsOnly:  # a protocol of no registered name: only the regions are its rule
        name: str = "regions-only"
        ignore_rules: IgnoreRules = IgnoreRules(drop_in_regions=True)

    boxes = _edge_boxes()
    want = _dense_rule(boxes, REGION, HEIGHT, WIDTH)
    image = ImageResult("a.jpg", (HEIGHT, WIDTH), torch.zeros(0, 6), torch.full((len(boxes),), 1),
                        torch.from_numpy(boxes), torch.from_numpy(REGION), box_format="xywh")  # fmt: skip
    np.testing.assert_array_equal(match_image(image, nc=2, protocol=RegionsOnly()).gt_counted, ~want)
    assert match_image(image, nc=2, protocol="yolo").gt_counted.all()

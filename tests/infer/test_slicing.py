"""Sliced inference: window layout, one-slice identity, and slice offsets mapped into the full image."""

import numpy as np
import pytest
import torch

from tphyolo.infer.detector import merge_detections
from tphyolo.infer.slicing import SliceConfig, slice_windows
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(1)
    return build_model("tph-yolov5n", num_classes=2).eval()  # four heads, strides 4 to 32


@pytest.fixture(scope="module")
def image():
    """Two 64 x 64 halves with different content."""
    return np.random.default_rng(2).integers(0, 255, (64, 128, 3), dtype=np.uint8)


def test_windows_cover_the_image_with_equal_sizes_and_flush_edges():
    windows = slice_windows(300, 500, SliceConfig(size=200, overlap=0.25))
    xs = sorted({w[0] for w in windows})
    ys = sorted({w[1] for w in windows})
    assert xs == [0, 150, 300] and ys == [0, 100]  # step 150; last column and row end at the edges
    assert len(windows) == 6
    assert all((x2 - x1, y2 - y1) == (200, 200) for x1, y1, x2, y2 in windows)
    assert max(w[2] for w in windows) == 500 and max(w[3] for w in windows) == 300


def test_small_image_is_one_window_and_full_adds_the_whole_image():
    assert slice_windows(100, 150, SliceConfig(size=200)) == [(0, 0, 150, 100)]
    assert slice_windows(100, 150, SliceConfig(size=200, full=True)) == [(0, 0, 150, 100)]
    assert slice_windows(100, 300, SliceConfig(size=200, overlap=0.5)) == [(0, 0, 200, 100), (100, 0, 300, 100)]
    windows = slice_windows(100, 300, SliceConfig(size=200, overlap=0.0, full=True))
    assert windows == [(0, 0, 200, 100), (100, 0, 300, 100), (0, 0, 300, 100)]


def test_bad_slice_settings_are_rejected():
    with pytest.raises(ValueError, match="overlap"):
        SliceConfig(size=256, overlap=1.0)
    with pytest.raises(ValueError, match="size"):
        SliceConfig(size=8)


def test_image_that_is_one_slice_equals_plain_inference(model, image):
    plain = Predictor(model, imgsz=128, conf=0.001, device="cpu")(image)[0]
    sliced = Predictor(model, imgsz=128, conf=0.001, device="cpu", slice=SliceConfig(size=160, overlap=0.2))(image)[0]
    assert len(plain) > 0
    assert torch.equal(plain.boxes, sliced.boxes) and torch.equal(plain.scores, sliced.scores)
    assert torch.equal(plain.labels, sliced.labels)


def test_slice_detections_are_shifted_by_their_window_and_merged(model, image):
    predictor = Predictor(model, imgsz=64, conf=0.001, device="cpu", slice=SliceConfig(size=64, overlap=0.0))
    plain = Predictor(model, imgsz=64, conf=0.001, device="cpu", merge="nms")
    left, right = plain([np.ascontiguousarray(image[:, :64]), np.ascontiguousarray(image[:, 64:])])
    shifted = right.boxes + torch.tensor([64.0, 0.0, 64.0, 0.0])
    rows = torch.cat(
        [
            torch.cat([left.boxes, left.scores[:, None], left.labels[:, None].float()], dim=1),
            torch.cat([shifted, right.scores[:, None], right.labels[:, None].float()], dim=1),
        ]
    )
    expected = merge_detections([rows], method="wbf", width=128, height=64, iou=0.55, max_det=500)
    got = predictor(image)[0]
    assert len(got) == len(expected) > 0
    torch.testing.assert_close(got.boxes, expected[:, :4], atol=1e-3, rtol=0)
    torch.testing.assert_close(got.scores, expected[:, 4])
    assert torch.equal(got.labels, expected[:, 5].long())


def test_slices_are_batched_with_the_same_result(model, image):
    one = Predictor(model, imgsz=64, conf=0.001, device="cpu", slice=64, batch=1)(image)[0]
    four = Predictor(model, imgsz=64, conf=0.001, device="cpu", slice=64, batch=4)(image)[0]
    torch.testing.assert_close(one.boxes, four.boxes, atol=1e-3, rtol=0)
    torch.testing.assert_close(one.scores, four.scores, atol=1e-5, rtol=0)

"""Sliced inference with every merge, checked against the rectangles a detector that really sees is shown."""

import numpy as np
import pytest
import torch
from tests.infer.block_finder import BlockFinder, draw_blocks

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.merge import merge_detections
from tphyolo.infer.slicing import SliceConfig, slice_windows
from tphyolo.ops import box_iou
from tphyolo.predict.predictor import Predictor

# A long red block cut by every window column, a green one inside one window, on a 300 x 200 black image.
BLOCKS = [(40, 60, 260, 110, 0), (250, 150, 270, 170, 1)]
IMAGE = draw_blocks(200, 300, BLOCKS)
TRUTH = torch.tensor([b[:4] for b in BLOCKS], dtype=torch.float32)


def _predict(slicing: SliceConfig, **settings):
    predictor = Predictor(BlockFinder(), imgsz=128, conf=0.1, device="cpu", slice=slicing, **settings)
    return predictor(IMAGE)[0]


def test_greedy_nmm_by_ios_with_the_full_image_gives_each_block_once():
    got = _predict(SliceConfig(128, 0.25, full=True), merge="greedy-nmm", match="ios")
    assert len(got) == 2
    assert torch.equal(got.labels.sort().values, torch.tensor([0, 1]))
    assert (box_iou(got.boxes, TRUTH).max(1).values > 0.9).all()


def test_nms_by_iou_leaves_the_pieces_of_the_cut_block():
    got = _predict(SliceConfig(128, 0.25, full=True), merge="nms")
    assert (got.labels == 0).sum() > 1  # the pieces of the red block overlap it by IoU < 0.45
    nmm = _predict(SliceConfig(128, 0.25, full=True), merge="nmm", match="ios")
    assert len(nmm) == 2 and (box_iou(nmm.boxes, TRUTH).max(1).values > 0.9).all()


def test_full_min_drops_the_small_boxes_of_the_full_image_pass():
    windows = slice_windows(200, 300, SliceConfig(128, 0.25))
    keep_all = {"merge": "nms", "merge_iou": 0.99}  # nothing suppressed: every pass's boxes count
    with_full = _predict(SliceConfig(128, 0.25, full=True), **keep_all)
    sliced = _predict(SliceConfig(128, 0.25), **keep_all)
    only_large = _predict(SliceConfig(128, 0.25, full=True, full_min=100), **keep_all)
    assert len(windows) == 6
    # The full pass adds the whole red block (220 px long) but not the green one (20 px) with full_min 100.
    assert len(with_full) == len(sliced) + 2
    assert len(only_large) == len(sliced) + 1
    assert torch.isclose(box_iou(only_large.boxes, TRUTH[:1]).max(), torch.tensor(1.0), atol=0.05)


def test_skip_empty_runs_no_blank_window_and_finds_the_same():
    image = np.zeros((200, 600, 3), np.uint8)
    image[:, :300] = IMAGE
    image[:, 300:] = 7  # a blank (NoData) half
    calls = []
    finder = BlockFinder()
    finder.register_forward_hook(lambda module, inputs, output: calls.append(len(inputs[0])))
    kept = Predictor(finder, imgsz=128, conf=0.1, device="cpu", slice=SliceConfig(128, 0.25, skip_empty=True))(image)
    ran = sum(calls)
    calls.clear()
    everything = Predictor(finder, imgsz=128, conf=0.1, device="cpu", slice=SliceConfig(128, 0.25))(image)
    blank = [w for w in slice_windows(200, 600, SliceConfig(128, 0.25)) if w[0] >= 300]
    assert ran == sum(calls) - len(blank) and len(blank) > 0
    assert torch.equal(kept[0].boxes, everything[0].boxes)
    blank_only = Predictor(finder, imgsz=128, device="cpu", slice=SliceConfig(128, skip_empty=True))(
        np.full((200, 300, 3), 7, np.uint8)
    )
    assert len(blank_only[0]) == 0


def test_auto_slice_size_is_the_network_input_size():
    predictor = Predictor(BlockFinder(), imgsz=128, device="cpu", slice="auto")
    assert predictor.slicing.size == 128
    with pytest.raises(ValueError, match="resolved"):
        slice_windows(200, 300, SliceConfig("auto"))
    with pytest.raises(ValueError, match="full-image pass"):
        SliceConfig(128, full_min=10)


def test_merge_settings_that_wbf_cannot_honour_are_refused():
    with pytest.raises(ValueError, match="--match"):
        InferenceConfig(match="ios")
    with pytest.raises(ValueError, match="--merge-agnostic"):
        InferenceConfig(merge_agnostic=True)
    assert InferenceConfig(merge="nmm").merge_threshold == 0.5
    assert InferenceConfig(merge="nms", iou=0.3).merge_threshold == 0.3


def test_merge_detections_by_ios_and_agnostic():
    inside = torch.tensor([[0, 0, 20, 20, 0.9, 0], [2, 2, 7, 7, 0.5, 1]], dtype=torch.float32)
    kw = {"width": 50, "height": 50, "iou": 0.5, "max_det": 10}
    assert len(merge_detections([inside], method="nms", match="ios", **kw)) == 2  # two classes
    assert len(merge_detections([inside], method="nms", match="ios", agnostic=True, **kw)) == 1
    merged = merge_detections([inside[:1], inside[1:]], method="greedy-nmm", match="ios", agnostic=True, **kw)
    torch.testing.assert_close(merged, inside[:1])

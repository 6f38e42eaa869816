import numpy as np
import pytest
import torch

from tphyolo.ops import (
    box_area,
    box_convert,
    box_iou,
    clip_boxes,
    cxcywh_to_xyxy,
    unletterbox,
    xywh_to_xyxy,
    xyxy_to_cxcywh,
    xyxy_to_xywh,
)


def test_conversions_round_trip_and_values():
    cxcywh = torch.tensor([[10.0, 20.0, 4.0, 6.0]])
    xyxy = cxcywh_to_xyxy(cxcywh)
    assert xyxy.tolist() == [[8.0, 17.0, 12.0, 23.0]]
    assert xyxy_to_cxcywh(xyxy).tolist() == cxcywh.tolist()
    assert xyxy_to_xywh(xyxy).tolist() == [[8.0, 17.0, 4.0, 6.0]]
    assert xywh_to_xyxy(torch.tensor([[8.0, 17.0, 4.0, 6.0]])).tolist() == xyxy.tolist()
    assert box_area(xyxy).tolist() == [24.0]


def test_numpy_inputs_give_float64_rows_and_empty_lists_give_no_rows():
    out = xywh_to_xyxy(np.array([[1, 2, 3, 4]], np.float32))
    assert out.dtype == np.float64 and out.tolist() == [[1, 2, 4, 6]]
    assert xywh_to_xyxy(np.array([])).shape == (0, 4)


def test_box_iou_of_arrays_matches_the_tensor_version():
    rng = np.random.default_rng(0)
    corner, size = rng.uniform(0, 50, (7, 2)), rng.uniform(1, 30, (7, 2))
    a = np.concatenate([corner, corner + size], axis=1)
    b = np.concatenate([a[:3] + 2.0, [[0.0, 0.0, 0.0, 5.0]]])  # the last box has no area
    ours = box_iou(a, b)
    assert ours.dtype == np.float64 and ours.shape == (7, 4)
    np.testing.assert_allclose(ours, box_iou(torch.from_numpy(a), torch.from_numpy(b)).numpy(), atol=1e-12)
    assert (ours[:, 3] == 0).all() and box_iou(np.zeros((0, 4)), b).shape == (0, 4)
    assert box_iou([[0, 0, 2, 2]], [[1, 0, 3, 2]]).tolist() == [[1 / 3]]
    single = box_iou(a.astype(np.float32), b.astype(np.float32))
    assert single.dtype == np.float32 and np.allclose(single, ours, atol=1e-6)


@pytest.mark.parametrize("fmt", ["xyxy", "xywh", "cxcywh"])
def test_box_convert_matches_torchvision(fmt):
    from torchvision.ops import box_convert as tv_box_convert

    boxes = torch.tensor([[1.0, 2.0, 5.0, 9.0], [0.5, 0.0, 3.0, 4.0]])
    for out_fmt in ("xyxy", "xywh", "cxcywh"):
        torch.testing.assert_close(box_convert(boxes, fmt, out_fmt), tv_box_convert(boxes, fmt, out_fmt))
    with pytest.raises(ValueError, match="unknown box format"):
        box_convert(boxes, fmt, "ltrb")


def test_clip_and_unletterbox():
    boxes = torch.tensor([[-5.0, 2.0, 50.0, 70.0]])
    assert clip_boxes(boxes, width=40, height=60).tolist() == [[0.0, 2.0, 40.0, 60.0]]
    # 200x100 image letterboxed into 128x128: ratio 0.64, 32 px of padding on top
    net = torch.tensor([[64.0, 64.0, 128.0, 96.0]])
    orig = unletterbox(net, ratio=(0.64, 0.64), pad=(0, 32), width=200, height=100)
    torch.testing.assert_close(orig, torch.tensor([[100.0, 50.0, 200.0, 100.0]]))
    # a window at (300, 40) of a larger image: clipped to the window, then shifted into the full image
    shifted = unletterbox(net, ratio=(0.64, 0.64), pad=(0, 32), width=150, height=100, offset=(300, 40))
    torch.testing.assert_close(shifted, torch.tensor([[400.0, 90.0, 450.0, 140.0]]))

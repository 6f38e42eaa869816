import torch

from tphyolo.ops import box_area, clip_boxes, scale_boxes_from_letterbox, xywh_to_xyxy, xyxy_to_xywh


def test_conversions_round_trip_and_values():
    xywh = torch.tensor([[10.0, 20.0, 4.0, 6.0]])
    xyxy = xywh_to_xyxy(xywh)
    assert xyxy.tolist() == [[8.0, 17.0, 12.0, 23.0]]
    assert xyxy_to_xywh(xyxy).tolist() == xywh.tolist()
    assert box_area(xyxy).tolist() == [24.0]


def test_clip_and_letterbox():
    boxes = torch.tensor([[-5.0, 2.0, 50.0, 70.0]])
    assert clip_boxes(boxes, width=40, height=60).tolist() == [[0.0, 2.0, 40.0, 60.0]]
    # 200x100 image letterboxed into 128x128: gain 0.64, 32 px of padding on top
    net = torch.tensor([[64.0, 64.0, 128.0, 96.0]])
    orig = scale_boxes_from_letterbox(net, gain=0.64, pad=(0, 32), width=200, height=100)
    torch.testing.assert_close(orig, torch.tensor([[100.0, 50.0, 200.0, 100.0]]))

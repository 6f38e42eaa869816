"""DetectionModel behaviour: strides, anchors, bias priors, output layout, fuse, precision, memory format,
torch.compile."""

from __future__ import annotations

import math

import pytest
import torch
from tests.helpers import relative_error
from torch import nn

from tphyolo.models import DetectionModel, build_model
from tphyolo.models.blocks import Conv

TINY = {  # two levels (strides 8 and 16), every layer kind of TPH-YOLOv5
    "nc": 2,
    "depth_multiple": 0.33,
    "width_multiple": 0.25,
    "anchors": [[4, 6, 8, 14], [16, 30, 30, 22]],
    "backbone": [
        [-1, 1, "Conv", [64, 6, 2, 2]],
        [-1, 1, "Conv", [128, 3, 2]],
        [-1, 1, "C3", [128]],
        [-1, 1, "Conv", [256, 3, 2]],
        [-1, 1, "SPPF", [256, 5]],
        [-1, 1, "Conv", [256, 3, 2]],
        [-1, 1, "C3TR", [256]],
    ],
    "head": [
        [-1, 1, "nn.Upsample", ["None", 2, "nearest"]],
        [[-1, 4], 1, "Concat", [1]],
        [-1, 1, "SPP", [128, [3, 5, 7]]],
        [-1, 1, "CBAM", [128]],
        [[9, 6], 1, "Detect", ["nc", "anchors"]],
    ],
}


def randomize_batchnorm(model: nn.Module, seed: int = 0) -> None:
    """Non-trivial BatchNorm statistics and affine parameters, so that folding them is really tested."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=generator) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=generator) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=generator) * 0.1)


@pytest.fixture
def tiny_model() -> DetectionModel:
    torch.manual_seed(0)
    model = DetectionModel(TINY)
    randomize_batchnorm(model)
    return model


def test_strides_anchors_and_bias_priors(tiny_model: DetectionModel) -> None:
    head = tiny_model.head
    assert tiny_model.stride.tolist() == [8.0, 16.0]
    expected = torch.tensor([[[0.5, 0.75], [1.0, 1.75]], [[1.0, 1.875], [1.875, 1.375]]])
    torch.testing.assert_close(head.anchors, expected)
    assert not tiny_model.anchors_need_fitting
    # The priors are added to the default initialisation: compare with a head initialised without them.
    fresh = head.output_convs()[1].bias.detach().view(head.na, head.no)
    torch.manual_seed(0)
    raw = DetectionModel(TINY).head
    assert fresh.shape == (2, 7)
    obj_prior = math.log(8 / (640 / 16) ** 2)
    cls_prior = math.log(0.6 / (2 - 0.999999))
    delta = fresh - raw.output_convs()[1].bias.detach().view(head.na, head.no)
    assert torch.allclose(delta, torch.zeros_like(delta))  # same seed, same result
    nn.init.zeros_(raw.output_convs()[1].bias)
    raw.initialize_biases()
    bias = raw.output_convs()[1].bias.detach().view(head.na, head.no)
    torch.testing.assert_close(bias[:, 4], torch.full((2,), obj_prior))
    torch.testing.assert_close(bias[:, 5:], torch.full((2, 2), cls_prior))
    assert bias[:, :4].abs().max() == 0


def test_anchor_order_follows_strides() -> None:
    cfg = dict(TINY, anchors=[[16, 30, 30, 22], [4, 6, 8, 14]])  # large anchors listed first
    head = DetectionModel(cfg).head
    torch.testing.assert_close(head.anchors[0], torch.tensor([[0.5, 0.75], [1.0, 1.75]]))


def test_anchor_count_gives_placeholders_in_grid_units() -> None:
    model = DetectionModel(dict(TINY, anchors=3))
    assert model.anchors_need_fitting
    anchors = model.head.anchors
    assert anchors.shape == (2, 3, 2)
    area = anchors.prod(-1)
    assert torch.all(area[:, 1:] > area[:, :-1])  # sizes grow within a level
    assert anchors.min() >= 1.0 and anchors.max() <= 8.0


def test_loading_anchors_ends_anchor_fitting() -> None:
    fitted = DetectionModel(TINY).state_dict()
    without_anchors = {k: v for k, v in fitted.items() if not k.endswith(".anchors")}
    model = DetectionModel(dict(TINY, anchors=2))
    model.load_state_dict(without_anchors, strict=False)
    assert model.anchors_need_fitting  # still placeholders
    model.load_state_dict(fitted)
    assert not model.anchors_need_fitting
    torch.testing.assert_close(model.head.anchors, fitted["model.11.anchors"])
    wrapped = nn.ModuleDict({"inner": DetectionModel(dict(TINY, anchors=2))})  # prefixed keys
    wrapped.load_state_dict({f"inner.{k}": v for k, v in fitted.items()})
    assert not wrapped["inner"].anchors_need_fitting


def test_train_and_eval_outputs(tiny_model: DetectionModel) -> None:
    x = torch.rand(2, 3, 64, 96)
    tiny_model.eval()
    with torch.no_grad():
        decoded = tiny_model(x)
        raw = tiny_model.head.predict_levels(tiny_model.features(x))
    assert decoded.shape == (2, 2 * (8 * 12 + 4 * 6), 7) and decoded.dtype == torch.float32
    # Level 0, anchor 1, row 3, column 5, decoded by hand.
    p = raw[0].view(2, 2, 7, 8, 12)[:, 1, :, 3, 5].sigmoid()  # (B, 7)
    index = 1 * 8 * 12 + 3 * 12 + 5
    expected_xy = (p[:, :2] * 2 - 0.5 + torch.tensor([5.0, 3.0])) * 8
    expected_wh = (p[:, 2:4] * 2) ** 2 * torch.tensor([8.0, 14.0])
    torch.testing.assert_close(decoded[:, index, :2], expected_xy)
    torch.testing.assert_close(decoded[:, index, 2:4], expected_wh)
    torch.testing.assert_close(decoded[:, index, 4:], p[:, 4:])
    tiny_model.train()
    out = tiny_model(x)
    assert [tuple(t.shape) for t in out] == [(2, 2, 8, 12, 7), (2, 2, 4, 6, 7)]


def test_fuse_returns_new_equal_model(tiny_model: DetectionModel) -> None:
    tiny_model.eval()
    fused = tiny_model.fuse()
    assert fused is not tiny_model
    convs = [m for m in fused.modules() if isinstance(m, Conv)]
    assert convs and all(m.bn is None and m.conv.bias is not None for m in convs)
    assert any(isinstance(m.bn, nn.BatchNorm2d) for m in tiny_model.modules() if isinstance(m, Conv))
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        assert relative_error(fused(x), tiny_model(x)) < 1e-5
    assert not fused.training


def test_channels_last_matches(tiny_model: DetectionModel) -> None:
    tiny_model.eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        ref = tiny_model(x)
        tiny_model.to(memory_format=torch.channels_last)
        out = tiny_model(x.contiguous(memory_format=torch.channels_last))
    assert relative_error(out, ref) < 1e-5


def test_bf16_autocast_forward_on_cpu() -> None:
    torch.manual_seed(0)
    model = build_model("tph-yolov5n").eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        ref = model(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert relative_error(out, ref) < 2e-2


def test_dropout_only_in_training(tiny_model: DetectionModel) -> None:
    x = torch.rand(1, 3, 64, 64)
    tiny_model.eval()
    with torch.no_grad():
        assert torch.equal(tiny_model(x), tiny_model(x))
    tiny_model.train()
    with torch.no_grad():
        first, second = tiny_model(x)[1], tiny_model(x)[1]
    assert not torch.equal(first, second)  # the transformer's dropout (p=0.1) is active


@pytest.mark.slow
def test_torch_compile_matches_eager_without_graph_breaks(tiny_model: DetectionModel) -> None:
    tiny_model.eval()
    x = torch.rand(1, 3, 64, 96)
    # fullgraph=True raises on any graph break; inductor's code generation takes minutes on 2 CPU cores.
    compiled = torch.compile(tiny_model, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        ref = tiny_model(x)
        out = compiled(x)
    assert relative_error(out, ref) < 1e-5

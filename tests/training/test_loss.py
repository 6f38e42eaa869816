"""YoloLoss against the original implementation's losses, and its target assignment on hand-made cases."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from tests.helpers import load_parity, model_from_fixture, relative_error, train_without_dropout
from torch import nn

from tphyolo.training.loss import YoloLoss, bce_terms, complete_iou, objectness_balance

FIXTURES = ("tph-yolov5", "tph-yolov5-swin", "tph-yolov5pp", "yolov5n")
VISDRONE_LOSS_HYP = {
    "box": 0.05,
    "obj": 1.0,
    "cls": 0.5,
    "cls_pw": 1.0,
    "obj_pw": 1.0,
    "fl_gamma": 0.0,
    "anchor_t": 4.0,
}


def load_fixture(parity_dir: Path, name: str) -> dict:
    return load_parity(parity_dir, f"{name}.parity.pt")


def grid_anchors(fixture: dict) -> torch.Tensor:
    stride = torch.tensor(fixture["stride"], dtype=torch.float32)
    anchors = torch.tensor(fixture["anchors_pixels"], dtype=torch.float32).view(len(stride), -1, 2)
    return anchors / stride.view(-1, 1, 1)  # (nl, na, 2) grid units


def fixture_loss(fixture: dict) -> YoloLoss:
    return YoloLoss(
        anchors=grid_anchors(fixture),
        strides=fixture["stride"],
        num_classes=fixture["nc"],
        hyp=fixture["hyp_scaled"],
    )


def test_every_fixture_is_covered(parity_dir: Path) -> None:
    found = {p.name.removesuffix(".parity.pt") for p in parity_dir.glob("*.parity.pt")}
    assert found <= set(FIXTURES), f"parity fixtures without a loss test: {sorted(found - set(FIXTURES))}"


@pytest.mark.parametrize("name", FIXTURES)
def test_loss_matches_original(parity_dir: Path, name: str) -> None:
    fixture = load_fixture(parity_dir, name)
    loss_fn = fixture_loss(fixture)
    assert loss_fn.num_levels == len(fixture["cases"][0]["train_out"])
    for i, case in enumerate(fixture["cases"]):
        loss, items = loss_fn([p.float() for p in case["train_out"]], case["targets"].float())
        assert loss.shape == (1,) and items.shape == (3,)
        assert relative_error(loss, case["loss"]) < 1e-4, f"{name} case {i}: loss {loss} vs {case['loss']}"
        assert relative_error(items, case["loss_items"]) < 1e-4, f"{name} case {i}: {items} vs {case['loss_items']}"
        assert not items.requires_grad


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in ("tph-yolov5", "tph-yolov5-swin") else n for n in FIXTURES]
)
def test_gradient_norm_matches_original(parity_dir: Path, name: str) -> None:
    """Original weights, train mode without dropout: the loss's gradient over all parameters has the
    reference's L2 norm."""
    fixture = load_fixture(parity_dir, name)
    model, state = model_from_fixture(fixture)
    loss_fn = YoloLoss.from_model(model, fixture["hyp_scaled"])
    torch.testing.assert_close(loss_fn.anchors, grid_anchors(fixture))
    for i, case in enumerate(fixture["cases"]):
        model.load_state_dict(state)  # each train-mode forward updates BatchNorm running statistics
        train_without_dropout(model)
        model.zero_grad(set_to_none=True)
        loss, _ = loss_fn(model(case["input"]), case["targets"])
        loss.backward()
        grad_norm = torch.linalg.vector_norm(
            torch.stack([p.grad.double().norm() for p in model.parameters() if p.grad is not None])
        ).item()
        err = abs(grad_norm - case["grad_norm"]) / case["grad_norm"]
        assert err < 1e-3, f"{name} case {i}: grad norm {grad_norm} vs {case['grad_norm']}"


def test_loss_under_bf16_autocast_is_float32(parity_dir: Path) -> None:
    fixture = load_fixture(parity_dir, "tph-yolov5pp")
    case = fixture["cases"][1]
    preds = [p.to(torch.bfloat16) for p in case["train_out"]]
    loss_fn = fixture_loss(fixture)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, items = loss_fn(preds, case["targets"])
    reference, _ = loss_fn([p.float() for p in preds], case["targets"])
    assert loss.dtype == torch.float32 and items.dtype == torch.float32
    torch.testing.assert_close(loss, reference, rtol=1e-6, atol=0)


def test_assignment_by_anchor_ratio_and_neighbour_cells() -> None:
    # One 8x8 level, anchors 1x1 and 5x5 cells; a 1.5x1.5-cell box centred at (2.3, 5.7) cells.
    loss_fn = YoloLoss(
        anchors=torch.tensor([[[1.0, 1.0], [5.0, 5.0], [7.0, 7.0]]]), strides=[8], num_classes=3, hyp=VISDRONE_LOSS_HYP
    )
    targets = torch.tensor([[1, 2, 2.3 / 8, 5.7 / 8, 1.5 / 8, 1.5 / 8]])
    found = loss_fn.assign(0, torch.Size((2, 3, 8, 8, 8)), targets)
    b, a, gj, gi, tbox, tcls = found.image, found.anchor, found.row, found.col, found.box, found.cls
    # 5/1.5 < 4 fits, 7/1.5 > 4 does not; x is nearer the left cell, y nearer the lower one.
    cells = sorted(zip(a.tolist(), gi.tolist(), gj.tolist(), strict=True))
    assert cells == sorted((anchor, x, y) for anchor in (0, 1) for x, y in ((2, 5), (1, 5), (2, 6)))
    assert b.tolist() == [1] * 6 and tcls.tolist() == [2] * 6
    offsets = {(x, y): box[:2].tolist() for x, y, box in zip(gi.tolist(), gj.tolist(), tbox, strict=True)}
    assert offsets[(2, 5)] == pytest.approx([0.3, 0.7], abs=1e-5)
    assert offsets[(1, 5)] == pytest.approx([1.3, 0.7], abs=1e-5)
    assert offsets[(2, 6)] == pytest.approx([0.3, -0.3], abs=1e-5)
    assert tbox[:, 2:].flatten().tolist() == pytest.approx([1.5] * 12, abs=1e-5)


def test_assignment_near_the_border_stays_in_the_grid() -> None:
    loss_fn = YoloLoss(anchors=torch.ones(1, 1, 2), strides=[8], num_classes=1, hyp=VISDRONE_LOSS_HYP)
    targets = torch.tensor([[0, 0, 0.3 / 8, 0.4 / 8, 1 / 8, 1 / 8], [0, 0, 1.0, 1.0, 1 / 8, 1 / 8]])
    found = loss_fn.assign(0, torch.Size((1, 1, 8, 8, 6)), targets)
    gj, gi, tbox = found.row, found.col, found.box
    # Near the top-left corner: no neighbours (the centre is within 1 cell of the edge).
    # On the bottom-right edge: its cell and both neighbours clamp into the last cell, offsets measured from it.
    assert sorted(zip(gi.tolist(), gj.tolist(), strict=True)) == [(0, 0), (7, 7), (7, 7), (7, 7)]
    assert tbox[gi == 7, :2].tolist() == [[1.0, 1.0]] * 3


def test_no_targets_gives_objectness_loss_only() -> None:
    loss_fn = YoloLoss(anchors=torch.ones(2, 3, 2), strides=[8, 16], num_classes=4, hyp=VISDRONE_LOSS_HYP)
    preds = [torch.zeros(2, 3, 4, 4, 9), torch.zeros(2, 3, 2, 2, 9)]
    loss, items = loss_fn(preds, torch.zeros(0, 6))
    # Every objectness logit 0 against target 0: BCE = log 2 per level, weighted by the balance (4, 1).
    assert items.tolist() == pytest.approx([0.0, math.log(2) * 5 * VISDRONE_LOSS_HYP["obj"], 0.0], rel=1e-6)
    assert loss.item() == pytest.approx(items.sum().item() * 2, rel=1e-6)


def test_single_class_has_no_class_loss() -> None:
    loss_fn = YoloLoss(anchors=torch.ones(1, 1, 2), strides=[8], num_classes=1, hyp=VISDRONE_LOSS_HYP)
    pred = torch.randn(1, 1, 4, 4, 6, generator=torch.Generator().manual_seed(0))
    _, items = loss_fn([pred], torch.tensor([[0, 0, 0.5, 0.5, 0.25, 0.25]]))
    assert items[0] > 0 and items[2] == 0


def test_label_smoothing_moves_class_targets() -> None:
    hyp = {**VISDRONE_LOSS_HYP, "label_smoothing": 0.2}
    loss_fn = YoloLoss(anchors=torch.ones(1, 1, 2), strides=[8], num_classes=2, hyp=hyp)
    pred = torch.zeros(1, 1, 4, 4, 7)
    pred[0, 0, 0, 0, 5:] = torch.tensor([3.0, -3.0])
    targets = torch.tensor([[0, 0, 0.4 / 4, 0.4 / 4, 0.25, 0.25]])  # within a cell of the corner: one cell
    _, items = loss_fn([pred], targets)
    # targets 0.9 / 0.1 for the two classes
    expected = bce_terms(
        torch.tensor([3.0, -3.0]), torch.tensor([0.9, 0.1]), pos_weight=torch.ones(1), focal_gamma=0.0
    ).mean()
    assert items[2].item() == pytest.approx(expected.item() * hyp["cls"], rel=1e-6)


def test_focal_terms_match_the_formula() -> None:
    logits, target = torch.tensor([2.0, -1.0, 0.5]), torch.tensor([1.0, 0.0, 0.3])
    pos_weight = torch.tensor([1.5])
    ours = bce_terms(logits, target, pos_weight=pos_weight, focal_gamma=2.0)
    p = logits.sigmoid()
    bce = -(pos_weight * target * p.log() + (1 - target) * (1 - p).log())
    p_t = target * p + (1 - target) * (1 - p)
    alpha = target * 0.25 + (1 - target) * 0.75
    torch.testing.assert_close(ours, bce * alpha * (1 - p_t) ** 2)


def test_complete_iou_on_known_boxes() -> None:
    box = torch.tensor([[5.0, 5.0, 4.0, 2.0]])
    assert complete_iou(box, box).item() == pytest.approx(1.0, abs=1e-6)
    # Same shape, shifted by 2 in x: IoU 2/6; enclosing box 6x2, diagonal^2 40, centre distance^2 4.
    shifted = torch.tensor([[7.0, 5.0, 4.0, 2.0]])
    assert complete_iou(box, shifted).item() == pytest.approx(2 / 6 - 4 / 40, abs=1e-5)


def test_objectness_balance_per_level_count() -> None:
    assert objectness_balance(3) == (4.0, 1.0, 0.4)
    assert objectness_balance(4) == (4.0, 1.0, 0.25, 0.06)
    assert objectness_balance(5) == (4.0, 1.0, 0.25, 0.06, 0.02)
    with pytest.raises(ValueError, match="levels"):
        objectness_balance(6)


def test_autobalance_normalises_to_the_stride_16_level() -> None:
    loss_fn = YoloLoss(
        anchors=torch.ones(3, 1, 2), strides=[8, 16, 32], num_classes=2, hyp=VISDRONE_LOSS_HYP, autobalance=True
    )
    preds = [torch.zeros(1, 1, 8, 8, 7), torch.zeros(1, 1, 4, 4, 7), torch.full((1, 1, 2, 2, 7), -2.0)]
    loss_fn(preds, torch.zeros(0, 6))
    balance = loss_fn.balance.tolist()
    assert balance[1] == pytest.approx(1.0)
    level_obj = [math.log(2), math.log(2), math.log(1 + math.exp(-2.0))]
    raw = [w * 0.9999 + 0.0001 / o for w, o in zip((4.0, 1.0, 0.4), level_obj, strict=True)]
    assert balance == pytest.approx([r / raw[1] for r in raw], rel=1e-6)


def test_gradients_reach_every_level() -> None:
    gen = torch.Generator().manual_seed(0)
    loss_fn = YoloLoss(
        anchors=torch.tensor([[[1.0, 1.5]], [[2.0, 2.0]]]), strides=[8, 16], num_classes=3, hyp=VISDRONE_LOSS_HYP
    )
    preds = [torch.randn(2, 1, 8, 8, 8, generator=gen), torch.randn(2, 1, 4, 4, 8, generator=gen)]
    for p in preds:
        p.requires_grad_(True)
    targets = torch.tensor([[0, 1, 0.4, 0.6, 0.15, 0.2], [1, 2, 0.7, 0.2, 0.3, 0.3]])
    loss, _ = loss_fn(preds, targets)
    loss.backward()
    for p in preds:
        assert torch.isfinite(p.grad).all() and p.grad[..., :4].abs().sum() > 0 and p.grad[..., 5:].abs().sum() > 0


class _Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.nl, self.na, self.nc = 2, 1, 5
        self.conv = nn.Conv2d(1, 1, 1)
        self.register_buffer("anchors", torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]]]))
        self.register_buffer("stride", torch.tensor([8.0, 16.0]))


def test_from_model_reads_the_head() -> None:
    model = nn.Sequential(nn.Conv2d(3, 1, 1), _Head())
    loss_fn = YoloLoss.from_model(model, VISDRONE_LOSS_HYP)
    assert (loss_fn.num_levels, loss_fn.num_anchors, loss_fn.num_classes) == (2, 1, 5)
    torch.testing.assert_close(loss_fn.anchors, model[1].anchors)
    with pytest.raises(ValueError, match="no detection head"):
        YoloLoss.from_model(nn.Conv2d(1, 1, 1), VISDRONE_LOSS_HYP)


def test_bad_construction_is_explained() -> None:
    with pytest.raises(KeyError, match="anchor_t"):
        YoloLoss(anchors=torch.ones(1, 1, 2), strides=[8], num_classes=2, hyp={"box": 1.0})
    with pytest.raises(ValueError, match="strides"):
        YoloLoss(anchors=torch.ones(2, 1, 2), strides=[8], num_classes=2, hyp=VISDRONE_LOSS_HYP)


def test_degenerate_targets_leave_gradients_finite() -> None:
    loss_fn = YoloLoss(anchors=torch.ones(1, 2, 2), strides=[8], num_classes=2, hyp=VISDRONE_LOSS_HYP)
    pred = torch.zeros(1, 2, 4, 4, 7, requires_grad=True)
    targets = torch.tensor([[0, 0, 0.5, 0.5, 0.0, 0.25], [0, 1, 0.3, 0.6, 0.0, 0.0], [0, 1, 0.6, 0.4, 0.3, 0.2]])
    loss, _ = loss_fn([pred], targets)
    loss.backward()
    assert torch.isfinite(loss).all() and torch.isfinite(pred.grad).all()


@pytest.mark.slow
def test_traces_as_one_graph(parity_dir: Path) -> None:
    """No data-dependent shapes or host syncs: torch.compile captures the whole loss."""
    fixture = load_fixture(parity_dir, "yolov5n")
    case = fixture["cases"][0]
    loss_fn = fixture_loss(fixture)
    compiled = torch.compile(loss_fn, backend="eager", fullgraph=True)
    loss, items = compiled(case["train_out"], case["targets"])
    assert relative_error(loss, case["loss"]) < 1e-4 and relative_error(items, case["loss_items"]) < 1e-4

"""Parameter groups, warm-up, gradient accumulation, weight-decay scaling and LR schedules, against values worked
out by hand from YOLOv5 v6.0's train.py (quoted next to each expectation), and where we differ, our rule."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tphyolo.models import build_model
from tphyolo.models.attention import TransformerLayer
from tphyolo.models.blocks import Conv
from tphyolo.models.swin import WindowAttention
from tphyolo.training.optim.rules import (
    accumulation_steps,
    apply_warmup,
    build_optimizer,
    lr_lambda,
    optimiser_steps,
    parameter_groups,
    scaled_weight_decay,
    warmup_accumulation,
)

HYP = {"warmup_bias_lr": 0.1, "warmup_momentum": 0.8, "momentum": 0.937}


def _names(model: nn.Module, groups: tuple[list, list, list]) -> tuple[set[str], set[str], set[str]]:
    name_of = {id(p): n for n, p in model.named_parameters()}
    return tuple({name_of[id(p)] for p in group} for group in groups)  # type: ignore[return-value]


def test_conv_bn_and_head_groups_are_yolov5s() -> None:
    # v6.0: `if hasattr(v, 'bias') and isinstance(v.bias, nn.Parameter): g2.append(v.bias)`;
    # `if isinstance(v, nn.BatchNorm2d): g0.append(v.weight)` (no decay);
    # `elif hasattr(v, 'weight') and isinstance(v.weight, nn.Parameter): g1.append(v.weight)` (decay).
    model = nn.Sequential(Conv(3, 8, 3), nn.Conv2d(8, 21, 1))  # a Conv+BN block, then a head conv with bias
    no_decay, decay, biases = _names(model, parameter_groups(model))
    assert no_decay == {"0.bn.weight"}
    assert decay == {"0.conv.weight", "1.weight"}
    assert biases == {"0.bn.bias", "1.bias"}


def test_transformer_layer_groups_differ_from_yolov5_as_documented() -> None:
    """v6.0 would put the LayerNorm weights in g1 (decayed: only BatchNorm2d is exempt). The original layer's
    nn.MultiheadAttention.in_proj_weight / in_proj_bias are named neither weight nor bias, so v6.0 puts them in
    no group and never trains them; here they are folded into `qkv`, whose weight and bias are trained."""
    layer = TransformerLayer(8, num_heads=2)
    no_decay, decay, biases = _names(layer, parameter_groups(layer))
    assert no_decay == {"ln1.weight", "ln2.weight"}  # v6.0: in g1, with decay
    assert decay == {"qkv.weight", "out_proj.weight", "fc1.weight", "fc2.weight"}
    assert biases == {"ln1.bias", "qkv.bias", "out_proj.bias", "ln2.bias"}  # qkv.bias: v6.0 never trains it


def test_swin_position_bias_table_is_trained_with_decay() -> None:
    # v6.0: a bare nn.Parameter named neither weight nor bias is in no group (not trained). Ours: every
    # parameter that requires grad is trained; 2-D and larger ones are decayed.
    attention = WindowAttention(8, window=2, num_heads=2)
    no_decay, decay, biases = _names(attention, parameter_groups(attention))
    assert no_decay == set()
    assert decay == {"relative_position_bias_table", "qkv.weight", "proj.weight"}
    assert biases == {"proj.bias"}


def test_groups_partition_the_trainable_parameters_of_a_model() -> None:
    model = build_model("tph-yolov5n", num_classes=2)
    model.model[0].requires_grad_(False)  # a frozen layer is in no group
    groups = parameter_groups(model)
    ids = [id(p) for group in groups for p in group]
    assert len(ids) == len(set(ids))
    assert set(ids) == {id(p) for p in model.parameters() if p.requires_grad}
    assert not any(id(p) in set(ids) for p in model.model[0].parameters())


def test_build_optimizer_sets_decay_per_group_and_momentum_as_beta1() -> None:
    model = nn.Sequential(Conv(3, 8, 3), nn.Conv2d(8, 21, 1))
    sgd = build_optimizer(model, name="SGD", lr=0.01, momentum=0.937, weight_decay=5e-4)
    assert [g["weight_decay"] for g in sgd.param_groups] == [0.0, 5e-4, 0.0]
    assert all(g["lr"] == 0.01 and g["momentum"] == 0.937 and g["nesterov"] for g in sgd.param_groups)
    adam = build_optimizer(model, name="Adam", lr=0.001, momentum=0.9, weight_decay=5e-4)
    assert all(g["lr"] == 0.001 and g["betas"] == (0.9, 0.999) for g in adam.param_groups)  # v6.0: lr0, not 3e-4
    assert isinstance(build_optimizer(model, name="AdamW", lr=0.001, momentum=0.9, weight_decay=0), torch.optim.AdamW)
    with pytest.raises(ValueError, match="unknown optimizer 'RMSprop'"):
        build_optimizer(model, name="RMSprop", lr=0.01, momentum=0.9, weight_decay=0)


@pytest.mark.parametrize(
    ("batch", "world", "expected"),
    [
        (16, 1, 4),  # v6.0: accumulate = max(round(nbs / batch_size), 1) = round(64 / 16)
        (24, 1, 3),  # round(2.67)
        (26, 1, 2),  # round(2.46)
        (48, 1, 1),  # round(1.33)
        (128, 1, 1),  # round(0.5) = 0 (round half to even), then max(.., 1)
        (8, 2, 4),  # batch_size is the total over processes: round(64 / 16)
    ],
)
def test_accumulation_steps(batch: int, world: int, expected: int) -> None:
    assert accumulation_steps(batch, world) == expected


def test_accumulation_steps_to_another_nominal_batch() -> None:
    assert accumulation_steps(8, nominal_batch=8) == 1  # the quick job steps every batch
    assert accumulation_steps(2, nominal_batch=64) == 32  # the paper's VisDrone recipe: batch 2, nbs 64


@pytest.mark.parametrize(
    ("batch", "world", "expected"),
    [
        (16, 1, 5e-4),  # v6.0: hyp['weight_decay'] *= batch_size * accumulate / nbs = 16 * 4 / 64
        (24, 1, 5.625e-4),  # 24 * 3 / 64 = 1.125
        (128, 1, 1e-3),  # 128 * 1 / 64 = 2
        (8, 2, 5e-4),  # (8 * 2) * 4 / 64 = 1
    ],
)
def test_scaled_weight_decay(batch: int, world: int, expected: float) -> None:
    assert scaled_weight_decay(5e-4, batch, world) == pytest.approx(expected, rel=1e-12)


def test_weight_decay_scales_against_64_whatever_the_nominal_batch() -> None:
    # Ours: the hyperparameters were tuned for 64 images per step; with nominal_batch 8 a step sees 8 images,
    # so the decay per step is 8 / 64 of the tuned one: 5e-4 * 8 * 1 / 64.
    assert scaled_weight_decay(5e-4, 8, nominal_batch=8) == pytest.approx(6.25e-5, rel=1e-12)


def test_linear_schedule() -> None:
    # v6.0: lf = lambda x: (1 - x / (epochs - 1)) * (1.0 - hyp['lrf']) + hyp['lrf'], from 1 at epoch 0 to
    # lrf at the last epoch (epochs - 1). Here epochs 5, lrf 0.1: 1, 0.775, 0.55, 0.325, 0.1.
    lf = lr_lambda(epochs=5, lrf=0.1, cosine=False)
    assert [lf(e) for e in range(5)] == pytest.approx([1.0, 0.775, 0.55, 0.325, 0.1], rel=1e-12)
    # Ours for a one-epoch run (v6.0 divides by zero): the lr stays at lr0.
    assert lr_lambda(epochs=1, lrf=0.1, cosine=False)(0) == 1.0


def test_cosine_schedule() -> None:
    # v6.0 one_cycle(1, lrf, epochs): ((1 - cos(x * pi / epochs)) / 2) * (lrf - 1) + 1. Epochs 4, lrf 0.2:
    # x=0: 1; x=1: (1 - cos(pi/4)) / 2 * -0.8 + 1 = 1 - 0.4 * (1 - 1/sqrt 2); x=2: 0.6; x=4 (never reached): 0.2.
    lf = lr_lambda(epochs=4, lrf=0.2, cosine=True)
    expected = [1.0, 1 - 0.4 * (1 - 1 / math.sqrt(2)), 0.6, 1 - 0.4 * (1 + 1 / math.sqrt(2)), 0.2]
    assert [lf(e) for e in range(5)] == pytest.approx(expected, rel=1e-12)


def _sgd_with_schedule(lr0: float = 0.01) -> torch.optim.Optimizer:
    model = nn.Sequential(Conv(3, 8, 3), nn.Conv2d(8, 21, 1))
    optimizer = build_optimizer(model, name="SGD", lr=lr0, momentum=HYP["momentum"], weight_decay=5e-4)
    torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda e: 1.0)  # sets each group's initial_lr
    return optimizer


@pytest.mark.parametrize(
    ("step", "epoch_factor", "lrs", "momentum"),
    [
        # v6.0, for ni <= nw with xi = [0, nw]:
        #   x['lr'] = np.interp(ni, xi, [warmup_bias_lr if j == 2 else 0.0, x['initial_lr'] * lf(epoch)])
        #   x['momentum'] = np.interp(ni, xi, [warmup_momentum, momentum])
        # nw = 100, lr0 = 0.01, warmup_bias_lr 0.1, momentum 0.8 -> 0.937.
        (0, 1.0, (0.0, 0.0, 0.1), 0.8),
        (25, 1.0, (0.0025, 0.0025, 0.1 - 0.09 * 0.25), 0.8 + 0.137 * 0.25),  # a quarter of the way
        (50, 0.5, (0.0025, 0.0025, 0.1 - 0.095 * 0.5), 0.8685),  # target lr0 * lf(epoch) = 0.005
        (100, 1.0, (0.01, 0.01, 0.01), 0.937),  # the end: every group at its scheduled lr
        (150, 1.0, (0.01, 0.01, 0.01), 0.937),  # np.interp holds the end value
    ],
)
def test_warmup_of_lr_and_momentum(step: int, epoch_factor: float, lrs: tuple, momentum: float) -> None:
    optimizer = _sgd_with_schedule()
    apply_warmup(optimizer, step=step, warmup_steps=100, epoch_factor=epoch_factor, hyp=HYP)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx(list(lrs), rel=1e-12, abs=1e-15)
    assert [g["momentum"] for g in optimizer.param_groups] == pytest.approx([momentum] * 3, rel=1e-12)


def test_warmup_moves_adams_beta1() -> None:
    # v6.0 warms only a 'momentum' key, which Adam does not have. Ours warms Adam's beta1 the same way.
    model = nn.Sequential(Conv(3, 8, 3))
    optimizer = build_optimizer(model, name="Adam", lr=0.001, momentum=0.937, weight_decay=0)
    torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda e: 1.0)
    apply_warmup(optimizer, step=25, warmup_steps=100, epoch_factor=1.0, hyp=HYP)
    assert [g["betas"] for g in optimizer.param_groups] == [(pytest.approx(0.83425, rel=1e-12), 0.999)] * 3
    assert optimizer.param_groups[2]["lr"] == pytest.approx(0.1 - 0.099 * 0.25, rel=1e-12)


@pytest.mark.parametrize(
    ("step", "accumulate", "expected"),
    [
        # v6.0: accumulate = max(1, np.interp(ni, xi, [1, nbs / batch_size]).round()), nw = 100.
        (0, 4, 1),
        (17, 4, 2),  # 1 + 3 * 0.17 = 1.51
        (50, 4, 2),  # 2.5 rounds half to even
        (84, 4, 4),  # 3.52
        (100, 4, 4),
        # Ours interpolates towards the rounded accumulate, v6.0 towards nbs / batch_size: at batch 24 and
        # step 80 v6.0 gives round(1 + 1.667 * 0.8) = round(2.33) = 2, ours round(1 + 2 * 0.8) = round(2.6) = 3.
        (80, 3, 3),
    ],
)
def test_warmup_accumulation(step: int, accumulate: int, expected: int) -> None:
    assert warmup_accumulation(step=step, warmup_steps=100, accumulate=accumulate) == expected


def test_optimiser_steps_follow_the_loop_s_rule() -> None:
    # 20 images in batches of 4 for 6 epochs with nbs 64: 30 batches, accumulate 16, warm-up 15 batches. During
    # warm-up the wait after step 0 grows by one each batch (batch k waits for k + 1): only batch 0 steps; then
    # batch 16 (16 batches after 0); batch 32 is past the run. Two steps.
    assert optimiser_steps(batches=30, warmup_steps=15, accumulate=16) == 2
    assert optimiser_steps(batches=30, warmup_steps=15, accumulate=1) == 30
    assert optimiser_steps(batches=10, warmup_steps=0, accumulate=2) == 5  # after batches 1, 3, 5, 7, 9


def test_a_run_of_a_few_steps_says_so(caplog) -> None:
    from types import SimpleNamespace

    from tphyolo.training.config import TrainConfig
    from tphyolo.training.optim.optimization import warn_if_few_steps

    cfg = TrainConfig(epochs=6, batch=4, nominal_batch=64)
    warn_if_few_steps(cfg, SimpleNamespace(accumulate=16, warmup_steps=15), batches_per_epoch=5, world_size=1)
    (record,) = caplog.records
    assert record.getMessage().startswith("2 optimiser steps in this run: an epoch has 5 batches of 4 images")
    assert "lower --nbs (--nbs 4 steps every batch)" in record.getMessage()
    caplog.clear()
    warn_if_few_steps(cfg, SimpleNamespace(accumulate=16, warmup_steps=15), batches_per_epoch=50, world_size=1)
    assert not caplog.records

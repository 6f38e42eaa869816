"""ModelEMA against YOLOv5 v6.0's rules (utils/torch_utils.py), with values worked out by hand:

self.decay = lambda x: decay * (1 - math.exp(-x / 2000))  # tau = 2000
self.updates += 1; d = self.decay(self.updates)
for k, v in self.ema.state_dict().items():
    if v.dtype.is_floating_point: v *= d; v += (1 - d) * msd[k].detach()
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tphyolo.training.optim.ema import ModelEMA, unwrap


def _model() -> nn.Module:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    with torch.no_grad():
        model[0].weight.fill_(1.0)
        model[0].bias.fill_(-1.0)
    return model


def test_decay_ramps_up_with_updates() -> None:
    ema = ModelEMA(_model())  # decay 0.9999, tau 2000
    assert ema.updates == 0 and ema.current_decay() == 0.0  # 0.9999 * (1 - e^0)
    ema.updates = 2000
    assert ema.current_decay() == pytest.approx(0.9999 * (1 - math.exp(-1)), rel=1e-12)  # 0.63206
    ema.updates = 20000
    assert ema.current_decay() == pytest.approx(0.9999 * (1 - math.exp(-10)), rel=1e-12)  # 0.99985


def test_first_update_is_almost_a_copy() -> None:
    model = _model()
    ema = ModelEMA(model)
    with torch.no_grad():
        model[0].weight.fill_(3.0)
    ema.update(model)
    d = 0.9999 * (1 - math.exp(-1 / 2000))  # 4.9983e-4 after one update
    assert ema.updates == 1
    torch.testing.assert_close(ema.ema[0].weight, torch.full((2, 2), d * 1.0 + (1 - d) * 3.0), rtol=1e-6, atol=0)


def test_update_averages_floats_and_copies_integer_buffers() -> None:
    model = _model()
    ema = ModelEMA(model, decay=0.75, tau=1e-9)  # exp(-updates / tau) = 0: d = 0.75 from the first update
    with torch.no_grad():
        model[0].weight.fill_(3.0)  # ema: 0.75 * 1 + 0.25 * 3 = 1.5
        model[0].bias.fill_(3.0)  # ema: 0.75 * -1 + 0.25 * 3 = 0.0
        model[1].running_mean.fill_(4.0)  # a float buffer is averaged too: 0.75 * 0 + 0.25 * 4 = 1.0
        model[1].num_batches_tracked.fill_(7)  # v6.0 leaves integer buffers alone; ours copies them
    ema.update(model)
    assert ema.current_decay() == 0.75
    assert torch.equal(ema.ema[0].weight, torch.full((2, 2), 1.5))
    assert torch.equal(ema.ema[0].bias, torch.zeros(2))
    assert torch.equal(ema.ema[1].running_mean, torch.ones(2))
    assert int(ema.ema[1].num_batches_tracked) == 7
    ema.update(model)  # again: 0.75 * 1.5 + 0.25 * 3 = 1.875
    assert ema.updates == 2 and torch.equal(ema.ema[0].weight, torch.full((2, 2), 1.875))
    assert torch.equal(model[0].weight, torch.full((2, 2), 3.0))  # the model itself is untouched


def test_ema_is_a_frozen_eval_copy() -> None:
    model = _model().train()
    ema = ModelEMA(model)
    assert ema.ema is not model and not ema.ema.training and model.training
    assert not any(p.requires_grad for p in ema.ema.parameters())
    assert all(p.requires_grad for p in model.parameters())


def test_wrapped_models_are_averaged_through_their_module() -> None:
    model = _model()
    wrapped = nn.DataParallel(model)  # state dict keys 'module.0.weight', ...
    ema = ModelEMA(wrapped, decay=0.75, tau=1e-9)
    assert unwrap(wrapped) is model and set(ema.ema.state_dict()) == set(model.state_dict())
    with torch.no_grad():
        model[0].weight.fill_(3.0)
    ema.update(wrapped)
    assert torch.equal(ema.ema[0].weight, torch.full((2, 2), 1.5))


def test_state_round_trip_keeps_the_update_count() -> None:
    model = _model()
    ema = ModelEMA(model, decay=0.75, tau=1e-9)
    with torch.no_grad():
        model[0].weight.fill_(3.0)
    ema.update(model)
    restored = ModelEMA(_model())
    restored.load_state_dict(ema.state_dict())
    assert restored.updates == 1 and torch.equal(restored.ema[0].weight, torch.full((2, 2), 1.5))

"""Our models reproduce the original implementation's outputs with its weights (reference fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from tphyolo.models import DetectionModel, build_model, convert_original_state_dict

TOLERANCE = 1e-4  # norm-wise relative error on CPU float32 (see the fixtures' README)


def relative_error(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return ((ours.double() - ref.double()).norm() / ref.double().norm()).item()


def model_from_fixture(fixture: dict) -> DetectionModel:
    """The fixture's architecture (its `model_yaml` text) with its float16 weights loaded as float32."""
    model = build_model(fixture["model_yaml"])
    state = {k: v.float() if v.is_floating_point() else v for k, v in fixture["state_dict_fp16"].items()}
    model.load_state_dict(convert_original_state_dict(state, model))
    return model


@pytest.mark.slow
@pytest.mark.parametrize("name", ["yolov5n", "tph-yolov5"])
def test_outputs_match_original(parity_dir: Path, name: str) -> None:
    fixture = torch.load(parity_dir / f"{name}.parity.pt", weights_only=True)
    model = model_from_fixture(fixture)
    assert model.stride.tolist() == fixture["stride"]
    nl, na = model.head.nl, model.head.na
    anchors = torch.tensor(fixture["anchors_pixels"]).view(nl, na, 2) / model.stride.view(-1, 1, 1)
    torch.testing.assert_close(model.head.anchors, anchors, rtol=0, atol=1e-3)  # float16 in the state dict
    model.head.set_anchors_(anchors)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for i, case in enumerate(fixture["cases"]):
        model.load_state_dict(state)  # a train-mode forward updates BatchNorm running statistics
        model.eval()
        with torch.no_grad():
            eval_out = model(case["input"])
        assert eval_out.shape == case["eval_out"].shape
        assert relative_error(eval_out, case["eval_out"]) < TOLERANCE, f"case {i} eval"
        model.train()
        for module in model.modules():
            if isinstance(module, nn.Dropout):  # the reference train outputs have dropout off
                module.eval()
        with torch.no_grad():
            train_out = model(case["input"])
        assert len(train_out) == len(case["train_out"])
        for level, (ours, ref) in enumerate(zip(train_out, case["train_out"], strict=True)):
            assert ours.shape == ref.shape
            assert relative_error(ours, ref) < TOLERANCE, f"case {i} train level {level}"

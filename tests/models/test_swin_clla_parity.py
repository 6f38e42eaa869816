"""C3STR (Swin) and CLLADetect models against the original implementation's stored outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.helpers import load_parity, original_weights, relative_error, train_without_dropout

from tphyolo.models.build import build_model
from tphyolo.models.model import DetectionModel

TOLERANCE = 1e-4  # norm-wise relative error of outputs (fixtures README)
VARIANTS = ("tph-yolov5-swin", "tph-yolov5pp")


def load_reference(parity_dir: Path, variant: str) -> tuple[DetectionModel, dict, dict[str, torch.Tensor]]:
    ref = load_parity(parity_dir, f"{variant}.parity.pt")
    model = build_model(ref["model_yaml"])
    stride = torch.tensor(ref["stride"])
    assert torch.equal(model.stride, stride)
    head = model.head
    head.set_anchors_(torch.tensor(ref["anchors_pixels"]).view(head.nl, head.na, 2) / stride.view(-1, 1, 1))
    return model, ref, original_weights(ref, model)


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_outputs_match_original(parity_dir: Path, variant: str) -> None:
    torch.manual_seed(0)
    model, ref, state = load_reference(parity_dir, variant)
    for i, case in enumerate(ref["cases"]):
        model.load_state_dict(state)  # the train-mode forward below updates BatchNorm statistics
        model.eval()
        with torch.no_grad():
            eval_out = model(case["input"])
        err = relative_error(eval_out, case["eval_out"])
        assert eval_out.shape == case["eval_out"].shape
        assert err < TOLERANCE, f"{variant} case {i} eval: relative error {err:.2e}"
        with torch.no_grad():
            train_out = train_without_dropout(model)(case["input"])
        assert len(train_out) == len(case["train_out"])
        for level, (ours, theirs) in enumerate(zip(train_out, case["train_out"], strict=True)):
            assert ours.shape == theirs.shape
            err = relative_error(ours, theirs)
            assert err < TOLERANCE, f"{variant} case {i} train level {level}: relative error {err:.2e}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_conversion_drops_derived_buffers_and_keeps_anchors(parity_dir: Path, variant: str) -> None:
    model, ref, state = load_reference(parity_dir, variant)
    dropped = set(ref["state_dict_fp16"]) - set(state)
    assert dropped and all(k.endswith(".attn.relative_position_index") for k in dropped)
    assert not any("relative_position_index" in k for k in model.state_dict())
    head_key = f"model.{len(model.model) - 1}.anchors"
    torch.testing.assert_close(state[head_key], model.head.anchors)  # fixture anchors == stored anchors

"""The original-computation twins (benchmarks/original_attention.py) compute what our blocks compute, on the
same weights."""

import pytest
import torch
from tests.helpers import benchmark_script

from tphyolo.models.attention import C3TR
from tphyolo.models.build import build_model
from tphyolo.models.clla import CLLABlock
from tphyolo.models.convert import convert_original_state_dict
from tphyolo.models.swin import C3STR

twins = benchmark_script("original_attention")
OriginalC3TR, OriginalC3STR = twins.OriginalC3TR, twins.OriginalC3STR
OriginalTransformerBlock, original_from = twins.OriginalTransformerBlock, twins.original_from
with_original_attention = twins.with_original_attention


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


@pytest.mark.parametrize("shape", [(2, 64, 6, 5), (1, 64, 1, 7)])
def test_c3tr_twin_matches(shape):
    torch.manual_seed(0)
    ours = C3TR(64, 64, 2).eval()
    twin = original_from(ours).eval()
    assert isinstance(twin, OriginalC3TR) and isinstance(twin.m, OriginalTransformerBlock)
    x = torch.randn(shape)
    with torch.no_grad():
        assert _max_diff(ours(x), twin(x)) < 1e-5


def test_original_weights_fold_into_ours():
    """The other direction: random original-layout weights converted with the model converter."""
    torch.manual_seed(1)
    original = OriginalC3TR(32, 48, 2).eval()
    ours = C3TR(32, 48, 2).eval()
    ours.load_state_dict(convert_original_state_dict(original.state_dict(), ours))
    x = torch.randn(2, 32, 5, 4)
    with torch.no_grad():
        assert _max_diff(ours(x), original(x)) < 1e-5


@pytest.mark.parametrize(("n", "shape"), [(2, (2, 128, 20, 13)), (3, (1, 128, 16, 16)), (2, (1, 128, 9, 24))])
def test_c3str_twin_matches_with_padding_and_shift(n, shape):
    torch.manual_seed(0)
    ours = C3STR(128, 128, n).eval()
    twin = original_from(ours).eval()
    assert isinstance(twin, OriginalC3STR)
    x = torch.randn(shape)
    with torch.no_grad():
        assert _max_diff(ours(x), twin(x)) < 1e-5


def test_c3str_twin_matches_in_training_without_randomness():
    """Train mode (drop_path 0 at 4 heads): outputs and input gradients agree."""
    torch.manual_seed(0)
    ours = C3STR(128, 128, 2).train()
    twin = original_from(ours).train()
    x = torch.randn(1, 128, 12, 12, requires_grad=True)
    (grad_ours,) = torch.autograd.grad(ours(x).square().sum(), x)
    (grad_twin,) = torch.autograd.grad(twin(x).square().sum(), x)
    assert _max_diff(grad_ours, grad_twin) < 1e-3 * float(grad_twin.abs().max())


def test_standard_shift_mask_has_no_twin():
    with pytest.raises(ValueError, match="shift_mask='original'"):
        original_from(C3STR(64, 64, 2, shift_mask="standard"))


def test_clla_twin_matches():
    torch.manual_seed(0)
    ours = CLLABlock(32, 16, 24, 30).eval()
    twin = original_from(ours).eval()
    x1, x2 = torch.randn(2, 16, 20, 18), torch.randn(2, 24, 10, 9)
    with torch.no_grad():
        assert _max_diff(ours(x1, x2), twin(x1, x2)) < 1e-5


def test_unknown_block_has_no_twin():
    with pytest.raises(TypeError, match="Conv2d"):
        original_from(torch.nn.Conv2d(3, 3, 1))


@pytest.mark.parametrize(("name", "expected"), [("tph-yolov5n", 2), ("tph-yolov5ppn", 2)])
def test_model_with_original_attention(name, expected):
    torch.manual_seed(0)
    model = build_model(name, num_classes=3).eval()
    twin, replaced = with_original_attention(model)
    assert replaced == expected
    assert any(isinstance(m, C3TR) for m in model.modules()) == (name == "tph-yolov5n")  # model untouched
    assert not any(type(m) in (C3TR, C3STR, CLLABlock) for m in twin.modules())
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        assert _max_diff(model(x), twin.eval()(x)) < 1e-3


def test_strict_fp32_restores_settings():
    from tphyolo.runtime.config import strict_fp32

    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    with strict_fp32():
        assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cudnn.allow_tf32
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before

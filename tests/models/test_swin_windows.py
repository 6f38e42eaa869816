"""Swin window plans and the eager layer path: the gather plan against pad + roll + partition, the eager
forward and gradients against the traced (torch.compile) formulation, and the attention-bias cache."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tphyolo.models.swin import C3STR, SwinLayer, SwinStack, build_shift_mask, partition_windows
from tphyolo.models.swin_windows import masked_windows, move_rows, window_plan

M, S = 8, 4  # window, shift
SIZES = [(8, 8), (16, 24), (13, 20), (7, 9), (17, 11), (24, 16)]
CPU = torch.device("cpu")


def random_layer(shift: int, shift_mask: str = "original", c: int = 64, heads: int = 2) -> SwinLayer:
    layer = SwinLayer(c, heads, window=M, shift=shift, shift_mask=shift_mask)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.3)
    return layer


@pytest.mark.parametrize("shift_mask", ["original", "standard"])
@pytest.mark.parametrize(("h", "w"), SIZES)
@pytest.mark.parametrize("shift", [0, S])
def test_plan_gathers_the_rolled_windows_and_scatters_back(h: int, w: int, shift: int, shift_mask: str) -> None:
    batch, c = 2, 3
    hp, wp = -(-h // M) * M, -(-w // M) * M
    masked = masked_windows(hp, wp, M, shift, shift_mask, CPU)
    plan = window_plan(batch, h, w, M, shift, masked, CPU)
    x = torch.randn(batch, h, w, c)
    padded = F.pad(x, (0, 0, 0, wp - w, 0, hp - h))
    rolled = torch.roll(padded, (-shift, -shift), (1, 2))
    expected = partition_windows(rolled, M)[:, plan.windows]  # (B, nW, N, C) in plan order
    got = padded.reshape(-1, c)[plan.gather].view(-1, batch, M * M, c).transpose(0, 1)
    assert torch.equal(got, expected)
    assert torch.equal(got.transpose(0, 1).reshape(-1, c)[plan.scatter].view(batch, h, w, c), x)
    assert sorted(plan.windows.tolist()) == list(range(plan.num_windows))
    mask = build_shift_mask(hp, wp, M, shift or S, shift_mask, torch.float32, CPU)[plan.windows, 0]
    nonzero = mask.flatten(1).ne(0).any(1) if shift else torch.zeros(plan.num_windows, dtype=torch.bool)
    assert torch.equal(nonzero, torch.arange(plan.num_windows) >= plan.plain)  # masked windows last


@pytest.mark.parametrize("shift_mask", ["original", "standard"])
@pytest.mark.parametrize(("h", "w"), SIZES)
def test_eager_path_matches_the_traced_path(h: int, w: int, shift_mask: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, h, w, 64)
    for shift in (0, S):
        layer = random_layer(shift, shift_mask).eval()
        with torch.no_grad():
            torch.testing.assert_close(layer(x), layer._forward_traced(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize(("h", "w"), [(13, 20), (16, 16)])
def test_eager_gradients_match_the_traced_path(h: int, w: int, training: bool) -> None:
    """Train mode, and eval mode with gradients (frozen normalisation): the bias table gets its gradient."""
    torch.manual_seed(0)
    x, upstream = torch.randn(2, h, w, 64, requires_grad=True), torch.randn(2, h, w, 64)
    layer = random_layer(S).train(training)
    grads = []
    for forward in (layer, layer._forward_traced):
        layer.zero_grad()
        x.grad = None
        (forward(x) * upstream).sum().backward()
        grads.append({"x": x.grad.clone(), **{name: p.grad.clone() for name, p in layer.named_parameters()}})
    assert grads[0]["attn.relative_position_bias_table"].abs().sum() > 0
    for name, expected in grads[1].items():
        torch.testing.assert_close(grads[0][name], expected, rtol=1e-4, atol=1e-4, msg=name)


def test_stack_gradient_matches_plain_permutes() -> None:
    torch.manual_seed(0)
    stack = SwinStack(64, 2, 2).eval()
    x = torch.randn(2, 64, 12, 20, requires_grad=True)
    upstream = torch.randn(2, 64, 12, 20)
    (stack(x) * upstream).sum().backward()
    ours = x.grad.clone()
    x.grad = None
    (stack.tr(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2) * upstream).sum().backward()
    torch.testing.assert_close(ours, x.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_eager_path_under_autocast_matches_the_traced_path(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    layer = random_layer(S).eval()
    x = torch.randn(1, 12, 20, 64)
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
        ours, traced = layer(x), layer._forward_traced(x)
    assert ours.dtype == traced.dtype
    torch.testing.assert_close(ours.float(), traced.float(), rtol=0.02, atol=0.02)


def test_bias_cache_follows_the_table() -> None:
    """Without gradients the biases are built once per size; an in-place change of the table (an optimiser
    step, an EMA update) or a loaded state dict is seen by the next call."""
    torch.manual_seed(0)
    layer = random_layer(S).eval()
    x = torch.randn(2, 12, 20, 64)
    with torch.no_grad():
        first = layer(x)
        cached = layer.biases_for(layer.plan_for(2, 12, 20, CPU), 2, torch.float32, CPU)
        assert layer.biases_for(layer.plan_for(2, 12, 20, CPU), 2, torch.float32, CPU) is cached
        layer.attn.relative_position_bias_table.mul_(-1.0)
        flipped = layer(x)
        torch.testing.assert_close(flipped, layer._forward_traced(x), rtol=1e-5, atol=1e-5)
        assert (flipped - first).abs().max() > 1e-3
        state = {k: v.clone() for k, v in layer.state_dict().items()}
        state["attn.relative_position_bias_table"].normal_()
        layer.load_state_dict(state)
        torch.testing.assert_close(layer(x), layer._forward_traced(x), rtol=1e-5, atol=1e-5)


def test_optimizer_steps_reach_the_eval_output() -> None:
    """Train steps update the table in place; an eval forward right after uses the new values."""
    torch.manual_seed(0)
    block = C3STR(64, 64, 2)
    x = torch.randn(1, 64, 12, 20)
    optimizer = torch.optim.SGD(block.parameters(), lr=1.0)
    for _ in range(2):
        block.eval()
        with torch.no_grad():
            before = block(x)
        block.train()
        optimizer.zero_grad()
        block(x).square().mean().backward()
        optimizer.step()
        block.eval()
        with torch.no_grad():
            after = block(x)
            traced = block.m.tr[1]._forward_traced(block.m.tr[0](block.cv1(x).permute(0, 2, 3, 1)))
            torch.testing.assert_close(block.m.tr[1](block.m.tr[0](block.cv1(x).permute(0, 2, 3, 1))), traced)
        assert (after - before).abs().max() > 1e-4


def test_plans_and_biases_are_dropped_on_device_or_dtype_moves() -> None:
    layer = random_layer(S).eval()
    with torch.no_grad():
        layer(torch.randn(1, 12, 20, 64))
        assert layer._plans and layer._biases
        layer.to(torch.float64)
        assert not layer._plans and not layer._biases
        out = layer(torch.randn(1, 12, 20, 64, dtype=torch.float64))
    assert out.dtype == torch.float64


def test_caches_built_under_inference_mode_serve_training() -> None:
    torch.manual_seed(0)
    block = C3STR(64, 64, 2)
    x = torch.randn(2, 64, 12, 20)
    block.eval()
    with torch.inference_mode():
        block(x)
    block.train()
    block(x).sum().backward()  # index plans and masks from inference mode are saved for backward here
    assert block.m.tr[1].attn.relative_position_bias_table.grad is not None
    for p in block.m.parameters():
        p.requires_grad_(False)  # frozen attention: the cached biases take part in a graph
    block.cv1.conv.weight.grad = None
    block(x).sum().backward()
    assert block.cv1.conv.weight.grad is not None


def test_inference_leaves_its_input_alone() -> None:
    """Without autograd the residual sums are written into the branch outputs, never into the input."""
    torch.manual_seed(0)
    x = torch.randn(2, 13, 20, 64)
    before = x.clone()
    for shift in (0, S):
        layer = random_layer(shift).eval()
        with torch.no_grad():
            out = layer(x)
        assert torch.equal(x, before) and out.data_ptr() != x.data_ptr()


@pytest.mark.parametrize(("h", "w"), [(13, 20), (16, 24)])
def test_moved_rows_have_the_gradient_of_index_select(h: int, w: int) -> None:
    hp, wp = -(-h // M) * M, -(-w // M) * M
    plan = window_plan(2, h, w, M, S, masked_windows(hp, wp, M, S, "original", CPU), CPU)
    for rows, index, back, unpicked in (
        (2 * hp * wp, plan.gather, plan.gather_back, plan.padding[:0]),
        (plan.gather.numel(), plan.scatter, plan.scatter_back, plan.padding),
    ):
        x = torch.randn(rows, 3, requires_grad=True)
        upstream = torch.randn(index.numel(), 3)
        (move_rows(x, index, back, unpicked) * upstream).sum().backward()
        ours = x.grad.clone()
        x.grad = None
        (x.index_select(0, index) * upstream).sum().backward()
        assert torch.equal(ours, x.grad)

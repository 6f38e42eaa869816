"""max_filter and the SPP / SPPF layers against the square stride-1 pools they replace (nn.MaxPool2d)."""

from __future__ import annotations

import pytest
import torch

from tphyolo.models.blocks import SPP, SPPF
from tphyolo.models.build import build_model
from tphyolo.models.max_filter import chain_steps, max_filter

FORMATS = {"nchw": torch.contiguous_format, "nhwc": torch.channels_last}
SIZE_SETS = [(5, 9, 13), (3, 7, 11), (3, 5, 7), (9, 5, 13), (5, 5, 9)]  # the last two do not chain


def distinct(*shape: int, memory_format=torch.contiguous_format) -> torch.Tensor:
    """A tensor of `shape` whose values are all different (no ties in any window), in a shuffled order."""
    torch.manual_seed(0)
    count = 1
    for n in shape:
        count *= n
    values = torch.randperm(count).float() / count - 0.5
    return values.view(shape).contiguous(memory_format=memory_format)


def square_pool(x: torch.Tensor, size: int) -> torch.Tensor:
    return torch.nn.MaxPool2d(size, stride=1, padding=size // 2)(x)


def test_chain_steps() -> None:
    assert chain_steps((5, 9, 13)) == [5, 5, 5]
    assert chain_steps((3, 7, 11)) == [3, 5, 5]
    assert chain_steps((3, 5, 7)) == [3, 3, 3]
    assert chain_steps([7]) == [7]
    assert chain_steps((9, 5, 13)) is None  # not increasing
    assert chain_steps((5, 5, 9)) is None  # repeated
    assert chain_steps((4, 8)) is None  # even
    assert chain_steps(()) is None


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("size", [1, 3, 5, 7, 13])
def test_max_filter_equals_square_pool(fmt: str, grad: bool, size: int) -> None:
    # 4 x 17: windows wider than the map's height, and borders on every side
    x = (torch.randn(2, 6, 4, 17) * 3).contiguous(memory_format=FORMATS[fmt]).requires_grad_(grad)
    x.data[0, 0, 1, 3] = float("nan")  # propagates as in pooling
    out = max_filter(x, size)
    expected = square_pool(x, size)
    assert torch.equal(out.nan_to_num(7.0), expected.nan_to_num(7.0))
    assert out.isnan().sum() == expected.isnan().sum() > 0
    if size > 1:
        assert out.is_contiguous(memory_format=FORMATS[fmt])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("size", [3, 5, 13])
def test_max_filter_gradients_equal_square_pool_with_ties(fmt: str, size: int) -> None:
    # a few distinct integer values: most windows hold equal maxima, and the gradient must reach the element the
    # square pool picks among them; three chained filters (as in SPP) with float upstream gradients: the sums
    # over the windows that pick one element must also run in the square pool's order
    torch.manual_seed(0)
    x = torch.randint(0, 4, (2, 5, 9, 23)).float().contiguous(memory_format=FORMATS[fmt])
    upstream = torch.randn(x.shape)
    grads = []
    for pool in (max_filter, square_pool):
        xs = x.clone().requires_grad_(True)
        out = pool(pool(pool(xs, size), size), size)
        out.backward(upstream)
        grads.append(xs.grad)
    assert torch.equal(grads[0], grads[1])
    assert grads[1].count_nonzero() < grads[1].numel() // 2  # ties: fewer winners than outputs


def test_max_filter_refuses_even_sizes() -> None:
    with pytest.raises(ValueError, match="odd"):
        max_filter(torch.zeros(1, 1, 4, 4), 4)


def pyramid(x: torch.Tensor, sizes, pool) -> torch.Tensor:
    """The SPP concatenation [x, pool_k1(x), pool_k2(x), ...] with every size pooled directly by `pool`."""
    return torch.cat([x, *(pool(x, size) for size in sizes)], dim=1)


def spp_reference(spp: SPP, x: torch.Tensor) -> torch.Tensor:
    hidden = spp.cv1(x)
    return spp.cv2(pyramid(hidden, spp.sizes, square_pool))


def sppf_reference(sppf: SPPF, x: torch.Tensor) -> torch.Tensor:
    hidden = sppf.cv1(x)
    return sppf.cv2(pyramid(hidden, [sppf.k, 2 * sppf.k - 1, 3 * sppf.k - 2], square_pool))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("sizes", SIZE_SETS)
def test_spp_forward_equals_direct_pools(fmt: str, sizes) -> None:
    torch.manual_seed(0)
    spp = SPP(8, 8, k=sizes).train().to(memory_format=FORMATS[fmt])
    x = torch.randn(2, 8, 13, 17).contiguous(memory_format=FORMATS[fmt])
    assert (spp.steps is None) == (list(sizes) != sorted(set(sizes)))
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert torch.equal(spp(x.requires_grad_(grad)), spp_reference(spp, x))
        x = x.detach()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("sizes", SIZE_SETS)
def test_spp_pool_gradients_equal_direct_pools(fmt: str, sizes) -> None:
    # distinct inputs (no ties) and integer upstream gradients (every sum exact): the gradients must be equal
    spp = SPP(8, 8, k=sizes)
    hidden = distinct(2, 4, 13, 17, memory_format=FORMATS[fmt])
    upstream = torch.randint(-4, 5, (2, 4 * (len(sizes) + 1), 13, 17)).float()
    grads = []
    for pool in ("ours", "square"):
        h = hidden.clone().requires_grad_(True)
        if pool == "square":
            out = pyramid(h, sizes, square_pool)
        elif spp.steps is None:
            out = pyramid(h, sizes, max_filter)
        else:
            pooled = [h]
            for step in spp.steps:
                pooled.append(max_filter(pooled[-1], step))
            out = torch.cat(pooled, dim=1)
        out.backward(upstream)
        grads.append(h.grad)
    assert torch.equal(grads[0], grads[1])
    assert grads[1].abs().sum() > 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_sppf_forward_and_gradients_equal_direct_pools(fmt: str) -> None:
    torch.manual_seed(0)
    sppf = SPPF(8, 8, k=5).to(memory_format=FORMATS[fmt])
    x = torch.randn(2, 8, 10, 12).contiguous(memory_format=FORMATS[fmt])
    with torch.no_grad():
        assert torch.equal(sppf(x), sppf_reference(sppf, x))
    outs, grads = [], []
    for forward in (sppf, lambda t: sppf_reference(sppf, t)):
        xs = x.clone().requires_grad_(True)
        out = forward(xs)
        out.square().sum().backward()
        outs.append(out.detach())
        grads.append(xs.grad)
    assert torch.equal(outs[0], outs[1])
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-5, atol=1e-5)  # the same terms, summed in another order


SLOW_MODELS = ("tph-yolov5n", "tph-yolov5ppn", "tph-yolov5-swins")


@pytest.mark.parametrize("name", ["yolov5n", *(pytest.param(name, marks=pytest.mark.slow) for name in SLOW_MODELS)])
def test_every_pyramid_layer_of_a_model_equals_direct_pools(name: str) -> None:
    """Each SPP / SPPF layer's output, on its actual input inside the model, equals the direct pools' in both
    layouts, in eval and with autograd recording: the whole model's output is that of square pools."""
    torch.manual_seed(0)
    model = build_model(name, num_classes=3)
    checked: list[str] = []

    def check(layer, inputs, output) -> None:
        reference = spp_reference if isinstance(layer, SPP) else sppf_reference
        assert torch.equal(output, reference(layer, inputs[0]))
        checked.append(type(layer).__name__)

    handles = [layer.register_forward_hook(check) for layer in model.model if isinstance(layer, SPP | SPPF)]
    try:
        for fmt in FORMATS.values():
            model.to(memory_format=fmt)
            x = torch.rand(1, 3, 64, 64).contiguous(memory_format=fmt)
            with torch.no_grad():
                model.eval()(x)
            model.train()(x)
    finally:
        for handle in handles:
            handle.remove()
    per_pass = {"yolov5n": 1, "tph-yolov5n": 5, "tph-yolov5ppn": 1, "tph-yolov5-swins": 1}[name]
    assert len(checked) == 4 * per_pass


def chained_square_pools(layer: SPP | SPPF, x: torch.Tensor) -> torch.Tensor:
    """The layer with every filter of its chain a square pool of the previous output, in x's own layout."""
    hidden = layer.cv1(x)
    steps = layer.steps if isinstance(layer, SPP) else [layer.k] * 3
    pooled = [hidden]
    for step in steps:
        pooled.append(square_pool(pooled[-1], step))
    return layer.cv2(torch.cat(pooled, dim=1))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("make", [lambda: SPP(6, 8, k=(5, 9, 13)), lambda: SPP(6, 8, k=(3, 7, 11)),
                                  lambda: SPPF(6, 8, k=5)], ids=["spp-5-9-13", "spp-3-7-11", "sppf-5"])  # fmt: skip
def test_pyramid_layer_training_equals_chained_square_pools_bit_for_bit(fmt: str, make) -> None:
    # integer inputs and convolution weights: the pooled maps hold many equal maxima (ties); the layer's output,
    # its layout, and the gradients of its input and of every parameter must be those of chained square pools
    torch.manual_seed(0)
    layer = make().train()
    with torch.no_grad():
        for conv in (layer.cv1.conv, layer.cv2.conv):
            conv.weight.copy_(torch.randint(-2, 3, conv.weight.shape).float())
    layer = layer.to(memory_format=FORMATS[fmt])
    x = torch.randint(0, 3, (2, 6, 11, 19)).float().contiguous(memory_format=FORMATS[fmt])
    upstream = torch.randn(2, 8, 11, 19)
    results = []
    for forward in (layer, lambda t: chained_square_pools(layer, t)):
        layer.zero_grad(set_to_none=True)
        xs = x.clone().requires_grad_(True)
        out = forward(xs)
        out.backward(upstream)
        results.append((out.detach(), xs.grad, [p.grad.clone() for p in layer.parameters()]))
    (out, grad, params), (ref_out, ref_grad, ref_params) = results
    assert out.is_contiguous(memory_format=FORMATS[fmt])
    assert torch.equal(out, ref_out)
    assert torch.equal(grad, ref_grad) and grad.abs().sum() > 0
    assert all(torch.equal(a, b) for a, b in zip(params, ref_params, strict=True))

"""torch.compile behaviour of the attention blocks: no graph breaks, and no recompilation when the input size
changes (dynamo marks the sizes dynamic after the first change; one more graph, then none).

Graphs are counted with a backend that only counts and runs the captured graph eagerly: graph breaks and
recompilations are decided by dynamo, whatever the backend.
"""

from __future__ import annotations

import pytest
import torch

from tphyolo.models import DetectionModel

ATTENTION = {  # every attention block in one tiny model: C3TR (stride 8), C3STR (stride 16), CLLADetect
    "nc": 2,
    "depth_multiple": 1.0,
    "width_multiple": 0.25,
    "anchors": [[4, 6, 8, 14], [16, 30, 30, 22]],
    "backbone": [
        [-1, 1, "Conv", [64, 6, 2, 2]],  # 0 stride 2
        [-1, 1, "Conv", [128, 3, 2]],  # 1 stride 4, the cross-layer source
        [-1, 1, "Conv", [256, 3, 2]],  # 2 stride 8
        [-1, 1, "C3TR", [256]],  # 3
        [-1, 1, "Conv", [256, 3, 2]],  # 4 stride 16
        [-1, 2, "C3STR", [256]],  # 5 regular and shifted windows, one head
    ],
    "head": [[[1, 3, 5], 1, "CLLADetect", ["nc", "anchors"]]],
}
# Multiples of 32 whose stride-16 maps have more than one 8 x 8 window per side: dynamo specialises a count
# of one window (sizes of 1 are special to it), so sides of at most 8 cells compile once more.
SIZES = [(160, 160), (192, 192), (224, 224), (160, 224), (224, 160)]
BATCH = 2  # with one image, CPU convolutions switch kernels by input size, a guard of the CPU backend only


class CountingBackend:
    """A torch.compile backend that counts the graphs dynamo hands it and runs them as they are."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):  # noqa: ANN204
        self.graphs += 1
        return gm.forward


@pytest.fixture
def model() -> DetectionModel:
    torch.manual_seed(0)
    return DetectionModel(ATTENTION)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.slow
def test_varying_sizes_compile_two_graphs_without_breaks(model: DetectionModel) -> None:
    model.eval()
    backend = CountingBackend()
    compiled = torch.compile(model, backend=backend, fullgraph=True)  # fullgraph: a graph break raises
    with torch.no_grad():
        for i, (h, w) in enumerate(SIZES):
            out = compiled(torch.rand(BATCH, 3, h, w))
            assert backend.graphs == min(i + 1, 2), f"recompiled at {h}x{w}"  # static first, then dynamic
    assert out.shape == (BATCH, 2 * (28 * 20 + 14 * 10), 7)


@pytest.mark.slow
def test_train_forward_compiles_without_breaks(model: DetectionModel) -> None:
    model.train()
    backend = CountingBackend()
    out = torch.compile(model, backend=backend, fullgraph=True)(torch.rand(BATCH, 3, 160, 192))
    assert backend.graphs == 1
    assert [tuple(t.shape) for t in out] == [(BATCH, 2, 20, 24, 7), (BATCH, 2, 10, 12, 7)]
    sum(t.float().mean() for t in out).backward()  # dropout and stochastic depth inside the graph
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.slow
def test_bf16_autocast_compiles_without_breaks(model: DetectionModel) -> None:
    model.eval()
    x = torch.rand(1, 3, 160, 160)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        ref = model(x)
        out = torch.compile(model, backend=CountingBackend(), fullgraph=True)(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref)

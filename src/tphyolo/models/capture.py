"""Whether the current forward is being captured into a graph rather than run eagerly.

Layers keep eager-only shortcuts (caches keyed by input size, index plans built from Python integers, views
such as `unfold` that exporters cannot size) behind this test: under torch.compile and under the TorchScript
tracer used by the ONNX and TorchScript exports, they take the formulation made of plain tensor operations,
so that the captured graph computes its shape arithmetic from the input and runs at every size it allows.
"""

import torch


def capturing() -> bool:
    """True under torch.compile (dynamo) and under `torch.jit.trace` (TorchScript and ONNX export)."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing()

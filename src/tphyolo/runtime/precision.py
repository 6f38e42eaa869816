"""Strict fp32 for comparisons: a scope in which matmuls and convolutions do not use TensorFloat-32, so that two
computations of one function (a model and its export, a block and its original-computation twin) can be compared
to fp32 tolerances."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def strict_fp32() -> Iterator[None]:
    """Within: fp32 matmuls and convolutions without TensorFloat-32 (for comparing a twin's outputs);
    the previous settings are restored on exit."""
    precision = torch.get_float32_matmul_precision()
    cudnn_tf32 = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.allow_tf32 = cudnn_tf32

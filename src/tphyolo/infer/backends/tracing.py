"""The scope in which tracing, saving and loading TorchScript and the ONNX exporter run without warnings."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch

_DEPRECATION_NOTICES = (
    "You are using the legacy TorchScript-based ONNX export",
    "`torch.jit.trace` is deprecated",
    "`torch.jit.trace_method` is deprecated",
    "`torch.jit.save` is deprecated",
    "`torch.jit.load` is deprecated",
    "The feature will be removed",
)


@contextlib.contextmanager
def quiet_jit() -> Iterator[None]:
    """Within: the warnings of the tracer and of deprecated TorchScript / ONNX-exporter calls are silenced.

    - TracerWarnings about Python values in the graph concern checks and caches (`if x.shape != ...`, grid
      and mask caches keyed by size) that the shape arithmetic recorded in the graph makes harmless; the
      export check compares outputs instead.
    - The ONNX exporter's note that strided slices are not constant-folded (they stay graph operations).
    - The deprecation notices of `torch.jit.trace/save/load` and of the TorchScript-based ONNX exporter: they
      are the chosen tools here (see `tphyolo.export.onnx_file`), and the notices say nothing a user can act on.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Constant folding - Only steps=1", category=UserWarning)
        for message in _DEPRECATION_NOTICES:
            warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)
            warnings.filterwarnings("ignore", message=message, category=FutureWarning)
        yield

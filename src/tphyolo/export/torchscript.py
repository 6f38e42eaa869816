"""Export to TorchScript: `torch.jit.trace` of the fused eval-mode model, saved with its metadata.

The trace records the shape arithmetic (padding to window multiples, grids, masks) as graph operations, so a
traced model runs at other sizes too; `dynamic` only decides what the backend accepts. The metadata is the
archive's extra file `METADATA_FILE` (JSON), read back by `torch.jit.load(..., _extra_files=...)` without
running the model.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from tphyolo.export.metadata import ExportMetadata
from tphyolo.export.tracing import quiet_jit

METADATA_FILE = "tphyolo.json"


def export_torchscript(model: nn.Module, example: torch.Tensor, path: Path, *, metadata: ExportMetadata) -> Path:
    """`model` traced on `example` and saved to `path` with `metadata`; returns the path. The trace is not
    re-run by the tracer's own check: the export check compares outputs afterwards."""
    with torch.no_grad(), quiet_jit():
        traced = torch.jit.trace(model, example, check_trace=False)
        torch.jit.save(traced, str(path), _extra_files={METADATA_FILE: metadata.to_json()})
    return path

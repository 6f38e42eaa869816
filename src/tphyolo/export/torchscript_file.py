"""Export to TorchScript: `torch.jit.trace` of the fused eval-mode model, saved with its metadata.

The trace records the shape arithmetic (padding to window multiples, grids, masks) as graph operations, so a
traced model runs at other sizes too; `dynamic` only decides what the backend accepts. The metadata is the
archive's extra file `METADATA_FILE` (JSON), read back by `torch.jit.load(..., _extra_files=...)` without
running the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from tphyolo.data.files.atomic import atomic_path
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.torchscript import METADATA_FILE
from tphyolo.infer.backends.tracing import quiet_jit

if TYPE_CHECKING:
    from tphyolo.export.config import ExportConfig
    from tphyolo.export.writer_api import ExportJob


def export_torchscript(model: nn.Module, example: torch.Tensor, path: Path, *, metadata: ExportMetadata) -> Path:
    """`model` traced on `example` and saved to `path` with `metadata`; returns the path. The trace is not
    re-run by the tracer's own check: the export check compares outputs afterwards."""
    with torch.no_grad(), quiet_jit():
        traced = torch.jit.trace(model, example, check_trace=False)
        with atomic_path(path) as tmp:
            torch.jit.save(traced, str(tmp), _extra_files={METADATA_FILE: metadata.to_json()})
    return path


def check(cfg: ExportConfig, device: torch.device) -> None:
    """Nothing to refuse: TorchScript comes with torch."""


def write(job: ExportJob) -> None:
    """The TorchScript archive of `job` (fp32, or fp16 with --half on CUDA)."""
    model, example = job.traced()
    export_torchscript(model, example, job.path, metadata=job.metadata)

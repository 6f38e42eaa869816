"""Export to a torch.export program (`.pt2`): `torch.export.export` of the fused eval-mode model, saved by
`torch.export.save` with its metadata.

Unlike a TorchScript trace, an ExportedProgram records its shapes as symbols with the ranges it was exported
for: a fixed export runs its own batch and size only; with `dynamic`, batch (1 to `MAX_BATCH`), height and width
(multiples of the stride up to `MAX_IMGSZ`) are free `torch.export.Dim`s. PyTorch specialises a dimension of
size 1 to a constant, so a dynamic export is traced on a batch of at least 2 and sides of at least two strides.
The metadata is the archive's extra file `METADATA_FILE` (JSON), read back by `torch.export.load(...,
extra_files=...)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from tphyolo.data.files.atomic import atomic_path
from tphyolo.data.files.image_limits import MAX_IMGSZ
from tphyolo.infer.backends.metadata import MAX_BATCH, ExportMetadata
from tphyolo.infer.backends.pt2 import METADATA_FILE

if TYPE_CHECKING:
    from pathlib import Path

    from tphyolo.export.config import ExportConfig
    from tphyolo.export.writer_api import ExportJob


def export_pt2(
    model: nn.Module, example: torch.Tensor, path: Path, *, metadata: ExportMetadata, dynamic: bool
) -> Path:
    """`model` exported on `example` (B, 3, H, W) and saved to `path` with `metadata`; returns the path."""
    shapes = None
    if dynamic:
        stride = metadata.stride
        b, _, h, w = example.shape
        example = example[:1].expand(max(b, 2), 3, max(h, 2 * stride), max(w, 2 * stride)).contiguous()
        sides = {name: torch.export.Dim(name, min=1, max=MAX_IMGSZ // stride) for name in ("height", "width")}
        batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
        shapes = ({0: batch, 2: stride * sides["height"], 3: stride * sides["width"]},)
    with torch.no_grad():
        program = torch.export.export(model, (example,), dynamic_shapes=shapes)
    with atomic_path(path) as tmp:
        torch.export.save(program, str(tmp), extra_files={METADATA_FILE: metadata.to_json()})
    return path


def check(cfg: ExportConfig, device: torch.device) -> None:
    """Nothing to refuse: torch.export comes with torch."""


def write(job: ExportJob) -> None:
    """The `.pt2` program of `job` (fp32, or fp16 with --half on CUDA)."""
    model, example = job.traced()
    export_pt2(model, example, job.path, metadata=job.metadata, dynamic=job.cfg.dynamic)

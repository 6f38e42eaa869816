"""Export to ONNX with the TorchScript-based exporter (`torch.onnx.export(..., dynamo=False)`): the trace of
`tphyolo.infer.backends.onnx_trace` (which says why that exporter), with tphyolo's metadata and ONNX's checker.

Input `images` (B, 3, H, W), output `output` (B, N, 5 + nc), float32 (or float16 input for fp16 exports);
with `dynamic`, B, H, W (and N) are free.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from tphyolo.data.files.atomic import atomic_path
from tphyolo.errors import InputError
from tphyolo.export.config import MIN_OPSET
from tphyolo.imports import require
from tphyolo.infer.backends import onnx_trace
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.onnx_trace import embed_metadata
from tphyolo.infer.config import DEFAULT_OPSET

if TYPE_CHECKING:
    from tphyolo.export.config import ExportConfig
    from tphyolo.export.writer_api import ExportJob


def trace_onnx(model: nn.Module, example: torch.Tensor, path: Path, *, dynamic: bool, opset: int) -> Path:
    """Writes `model` (eval mode, fused) traced on `example` to `path` as ONNX, without metadata; ValueError for
    an opset below `MIN_OPSET`."""
    if opset < MIN_OPSET:
        raise InputError(f"--opset {opset}: attention exports from opset {MIN_OPSET} on")
    return onnx_trace.trace_onnx(model, example, path, dynamic=dynamic, opset=opset)


def export_onnx(
    model: nn.Module,
    example: torch.Tensor,
    path: Path,
    *,
    metadata: ExportMetadata,
    dynamic: bool,
    opset: int = DEFAULT_OPSET,
    simplify: bool = False,
) -> Path:
    """`model` as an ONNX file at `path` carrying `metadata` in its metadata_props (and simplified with
    onnxslim when `simplify`); returns the path."""
    onnx = require("onnx", purpose="ONNX export")
    slim = require("onnxslim", purpose="--simplify") if simplify else None
    with atomic_path(path) as tmp:  # a file there stays whole until this one is
        trace_onnx(model, example, tmp, dynamic=dynamic, opset=opset)
        proto = onnx.load(str(tmp))
        if slim is not None:
            proto = slim.slim(proto)
        embed_metadata(proto, metadata)
        onnx.checker.check_model(proto)
        onnx.save(proto, str(tmp))
    return path


def check(cfg: ExportConfig, device: torch.device) -> None:
    """MissingExtraError (one line) when a package the ONNX export or its check needs is not installed."""
    require("onnx", purpose="ONNX export")
    require("onnxruntime", purpose="checking the ONNX export")
    if cfg.simplify:
        require("onnxslim", purpose="--simplify")


def write(job: ExportJob) -> None:
    """The ONNX file of `job` (fp32, or fp16 with --half on CUDA)."""
    model, example = job.traced()
    cfg = job.cfg
    export_onnx(model, example, job.path, metadata=job.metadata, dynamic=cfg.dynamic, opset=cfg.opset,
                simplify=cfg.simplify)  # fmt: skip

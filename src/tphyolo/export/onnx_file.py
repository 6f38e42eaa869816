"""Export to ONNX with the TorchScript-based exporter (`torch.onnx.export(..., dynamo=False)`).

Why not the dynamo exporter (torch.export): with free image sizes it fails on tph-yolov5pp (CLLA's unfold
view) and tph-yolov5-swin (the window partition view of a padded map): torch.export cannot prove the
symbolic view sizes equal, and reports "Cannot view a tensor with shape ...". It also needs onnxscript and
takes about ten times longer (~60 s against ~6 s for an n-scale model on 2 cores). The TorchScript
exporter records the shape arithmetic as graph operations (`Shape`, `Mod`, `Range`, ...), so Swin's padding
to window multiples, the rolls and the shift masks are computed from the runtime input size: one
`--dynamic` file runs at every multiple of the stride. `F.scaled_dot_product_attention` exports as
MatMul / Softmax (opset >= 14).

Input `images` (B, 3, H, W), output `output` (B, N, 5 + nc), float32 (or float16 input for fp16 exports);
with `dynamic`, B, H, W (and N) are free.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from tphyolo.data.files.atomic import atomic_path
from tphyolo.export.config import DEFAULT_OPSET, MIN_OPSET
from tphyolo.imports import require
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.tracing import quiet_jit

if TYPE_CHECKING:
    from tphyolo.export.config import ExportConfig
    from tphyolo.export.formats import ExportJob

INPUT_NAME = "images"
OUTPUT_NAME = "output"


def trace_onnx(model: nn.Module, example: torch.Tensor, path: Path, *, dynamic: bool, opset: int) -> Path:
    """Writes `model` (eval mode, fused) traced on `example` to `path` as ONNX, without metadata."""
    if opset < MIN_OPSET:
        raise ValueError(f"--opset {opset}: attention exports from opset {MIN_OPSET} on")
    axes = {INPUT_NAME: {0: "batch", 2: "height", 3: "width"}, OUTPUT_NAME: {0: "batch", 1: "anchors"}}
    with torch.no_grad(), quiet_jit():
        torch.onnx.export(
            model,
            (example,),
            str(path),
            dynamo=False,
            opset_version=opset,
            do_constant_folding=True,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes if dynamic else None,
        )
    return path


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


def embed_metadata(proto, metadata: ExportMetadata) -> None:  # noqa: ANN001 - an onnx.ModelProto
    """Replaces the metadata_props of `proto` by `metadata`, one entry per field."""
    del proto.metadata_props[:]
    for key, value in metadata.to_strings().items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value


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

"""A PyTorch detection model traced to ONNX with the TorchScript-based exporter (`torch.onnx.export(...,
dynamo=False)`): what `tphyolo export` writes and what the compiled CPU runtimes (`tphyolo.infer.backends.compiled`)
start from.

Why not the dynamo exporter (torch.export): with free image sizes it fails on tph-yolov5pp (CLLA's unfold
view) and tph-yolov5-swin (the window partition view of a padded map): torch.export cannot prove the
symbolic view sizes equal, and reports "Cannot view a tensor with shape ...". It also needs onnxscript and
takes about ten times longer (~60 s against ~6 s for an n-scale model on 2 cores); OpenVINO's own
`convert_model` from a PyTorch module took 18 s against 2.5 s for the ONNX trace of yolov5n. The TorchScript
exporter records the shape arithmetic as graph operations (`Shape`, `Mod`, `Range`, ...), so Swin's padding
to window multiples, the rolls and the shift masks are computed from the runtime input size: one
`dynamic` file runs at every multiple of the stride. `F.scaled_dot_product_attention` exports as
MatMul / Softmax (opset >= 14).

Input `images` (B, 3, H, W), output `output` (B, N, 5 + nc), float32 (or float16 input for fp16 exports);
with `dynamic`, B, H, W (and N) are free.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.tracing import quiet_jit

INPUT_NAME = "images"
OUTPUT_NAME = "output"


def trace_onnx(model: nn.Module, example: torch.Tensor, path: Path, *, dynamic: bool, opset: int) -> Path:
    """Writes `model` (eval mode, fused) traced on `example` to `path` as ONNX, without metadata."""
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


def embed_metadata(proto, metadata: ExportMetadata) -> None:  # noqa: ANN001 - an onnx.ModelProto
    """Replaces the metadata_props of `proto` by `metadata`, one entry per field."""
    del proto.metadata_props[:]
    for key, value in metadata.to_strings().items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value

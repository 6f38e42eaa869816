"""Export to OpenVINO IR: a folder `<name>_openvino_model/` holding `<name>.xml` (graph and metadata) and
`<name>.bin` (weights), converted from the ONNX export
(`tphyolo.infer.backends.openvino.ir_from_onnx`, as the compiled CPU runtime converts checkpoints).

The metadata lives in the IR's rt_info (`<rt_info><tphyolo>...` in the .xml), one JSON value per field.

With `dynamic`, batch, height and width stay free, as in the ONNX file; a fixed-size IR runs its export batch
and size only.

`half` stores the weights in fp16 (OpenVINO decompresses them for the CPU); fp32 IRs keep fp32 weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.imports import require
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.openvino import ir_from_onnx, save_ir

if TYPE_CHECKING:
    import torch

    from tphyolo.export.config import ExportConfig
    from tphyolo.export.writer_api import ExportJob

__all__ = ["check", "export_openvino", "save_ir", "write"]  # save_ir: the INT8 writer's too


def export_openvino(onnx_path: Path, folder: Path, *, metadata: ExportMetadata, half: bool = False) -> Path:
    """Converts the ONNX file `onnx_path` (fp32) into an IR in `folder` (created), named after the folder
    without its `_openvino_model` suffix; writes `metadata` into its rt_info. Returns the folder."""
    return ir_from_onnx(onnx_path, folder, metadata=metadata, half=half)


def check(cfg: ExportConfig, device: torch.device) -> None:
    """MissingExtraError (one line) when openvino is not installed."""
    require("openvino", purpose="OpenVINO export")


def write(job: ExportJob) -> None:
    """The IR folder of `job`, converted from the fp32 ONNX trace (fp16 weights with --half)."""
    export_openvino(job.fp32_onnx(), job.path, metadata=job.metadata, half=job.cfg.half)

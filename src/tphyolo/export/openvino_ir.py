"""Export to OpenVINO IR: a folder `<name>_openvino_model/` holding `<name>.xml` (graph and metadata) and
`<name>.bin` (weights), converted from the ONNX export.

The metadata lives in the IR's rt_info (`<rt_info><tphyolo>...` in the .xml), one JSON value per field.

With `dynamic`, batch, height and width stay free, as in the ONNX file; a fixed-size IR runs its export batch
and size only.

`half` stores the weights in fp16 (OpenVINO decompresses them for the CPU); fp32 IRs keep fp32 weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.data.files.atomic import atomic_path
from tphyolo.imports import require
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.openvino import RT_INFO_SECTION

if TYPE_CHECKING:
    import torch

    from tphyolo.export.config import ExportConfig
    from tphyolo.export.formats import ExportJob


def export_openvino(onnx_path: Path, folder: Path, *, metadata: ExportMetadata, half: bool = False) -> Path:
    """Converts the ONNX file `onnx_path` (fp32) into an IR in `folder` (created), named after the folder
    without its `_openvino_model` suffix; writes `metadata` into its rt_info. Returns the folder."""
    ov = require("openvino", purpose="OpenVINO export")
    model = ov.Core().read_model(str(onnx_path))  # unlike ov.convert_model: no telemetry, a tenth of the time
    return save_ir(model, folder, metadata=metadata, half=half)


def save_ir(model, folder: Path, *, metadata: ExportMetadata, half: bool = False) -> Path:  # noqa: ANN001
    """Writes the `openvino.Model` `model` with `metadata` in its rt_info into `folder` (created), as
    `<ir_stem>.xml` + `.bin`, fp16 weights when `half`. Returns the folder."""
    ov = require("openvino", purpose="OpenVINO export")
    for key, value in metadata.to_strings().items():
        model.set_rt_info(value, [RT_INFO_SECTION, key])
    with atomic_path(folder) as tmp:  # the folder is replaced once the new IR is whole
        tmp.mkdir(parents=True)
        ov.save_model(model, str(tmp / f"{ir_stem(folder)}.xml"), compress_to_fp16=half)
    return folder


def ir_stem(folder: Path) -> str:
    """`W` for a folder `W_openvino_model`, else the folder's name."""
    return folder.name.removesuffix("_openvino_model") or folder.name



def check(cfg: ExportConfig, device: torch.device) -> None:
    """MissingExtraError (one line) when openvino is not installed."""
    require("openvino", purpose="OpenVINO export")


def write(job: ExportJob) -> None:
    """The IR folder of `job`, converted from the fp32 ONNX trace (fp16 weights with --half)."""
    export_openvino(job.fp32_onnx(), job.path, metadata=job.metadata, half=job.cfg.half)

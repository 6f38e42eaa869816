"""INT8 ONNX (`--format onnx --int8`) by ONNX Runtime's static quantization in QDQ format.

The float trace is first prepared as ONNX Runtime recommends (`quant_pre_process`: shape inference and the basic
graph optimisations, which keep the node names). Calibration runs it on the batches and records each activation's
range (min/max; ONNX Runtime's percentile ranges were tried and not kept: their histogram stops with "Too many bins
for data range" on an activation without spread, as tph-yolov5n's random weights at 320 px have, docs/int8.md).
QuantizeLinear/DequantizeLinear pairs are then inserted around the inputs of the quantized operation types
(`OP_TYPES`: convolutions and matrix products): uint8 activations, asymmetric per tensor; int8 weights, symmetric
per output channel, in 7 bits (`reduce_range`) so that the vpmaddubsw kernels of x86 CPUs without VNNI cannot
saturate their 16-bit sums. ONNX Runtime fuses each Q/DQ group into an integer kernel when it loads the file.
Nodes named in `keep_float` stay float; the writer takes them from the family's policy
(`tphyolo.export.int8_policy`). ONNX Runtime has no transformer mode: attention's matrix products are quantized
like the others unless the policy keeps them.

The file is written as `W_int8.onnx` with the metadata of the float file plus the `int8_*` fields.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tphyolo.data.files.atomic import atomic_path
from tphyolo.errors import InputError
from tphyolo.export.int8_policy import QUANTIZED_OPS, int8_plan
from tphyolo.export.onnx_file import embed_metadata
from tphyolo.export.quantize_openvino import model_input
from tphyolo.imports import require
from tphyolo.infer.backends.metadata import ExportMetadata

if TYPE_CHECKING:
    import torch

    from tphyolo.export.config import ExportConfig
    from tphyolo.export.writer_api import ExportJob

OP_TYPES = QUANTIZED_OPS
PURPOSE = "--int8 ONNX export"
METHOD = "ONNX Runtime static quantization, QDQ, uint8 activations, 7-bit int8 weights per channel"


def quantize_onnx(
    float_path: Path,
    out_path: Path,
    calibration: Sequence[np.ndarray],
    *,
    keep_float: Sequence[str] = (),
    reduce_range: bool = True,
    calibrate_method: str = "MinMax",
) -> Path:
    """Writes the INT8 QDQ model of the float ONNX file `float_path` to `out_path`, calibrated on the batches
    of `calibration` (uint8 RGB images (B, 3, H, W), letterboxed as the model sees them). `keep_float`: node
    names left in float (ValueError for a name the graph lacks). `calibrate_method`: how ranges are chosen
    from the calibration activations, a name of ONNX Runtime's `CalibrationMethod` (MinMax, Entropy,
    Percentile). Metadata of the float file is not carried
    over; the caller writes it. Returns `out_path`."""
    onnx = require("onnx", purpose=PURPOSE)
    quantization = require("onnxruntime.quantization", purpose=PURPOSE)
    with tempfile.TemporaryDirectory(prefix="tphyolo-int8-") as tmp:
        prepared = Path(tmp) / "prepared.onnx"
        quantization.quant_pre_process(str(float_path), str(prepared), skip_symbolic_shape=True)
        graph = onnx.load(str(prepared)).graph
        missing = sorted(set(keep_float) - {node.name for node in graph.node})
        if missing:
            raise InputError(f"{float_path}: no node named {missing} to keep in float")
        with contextlib.redirect_stdout(io.StringIO()):  # the histogram calibrators print their settings
            quantization.quantize_static(
                str(prepared),
                str(out_path),
                _Reader(quantization.CalibrationDataReader, graph.input[0].name, calibration),
                quant_format=quantization.QuantFormat.QDQ,
                op_types_to_quantize=list(OP_TYPES),
                per_channel=True,
                reduce_range=reduce_range,
                activation_type=quantization.QuantType.QUInt8,
                weight_type=quantization.QuantType.QInt8,
                nodes_to_exclude=list(keep_float),
                calibrate_method=quantization.CalibrationMethod[calibrate_method],
            )
    return out_path


def _Reader(base: type, input_name: str, batches: Sequence[np.ndarray]):  # noqa: ANN202, N802
    """A CalibrationDataReader (`base`, ONNX Runtime's abstract class) feeding `batches` once, with a progress
    bar (ONNX Runtime shows none)."""
    from tqdm import tqdm

    class Reader(base):
        def __init__(self) -> None:
            self.batches: Iterator[np.ndarray] = iter(tqdm(batches, desc="ONNX Runtime calibration"))

        def get_next(self) -> dict[str, np.ndarray] | None:
            batch = next(self.batches, None)
            return None if batch is None else {input_name: model_input(batch)}

    return Reader()


def check(cfg: ExportConfig, device: torch.device) -> None:
    """MissingExtraError (one line, naming the extra) when onnx or onnxruntime is not installed."""
    require("onnx", purpose=PURPOSE)
    require("onnxruntime", purpose=PURPOSE)


def write(job: ExportJob, layers: tuple[int, ...] = ()) -> None:
    """The INT8 ONNX file of `job`, quantized from the fp32 ONNX trace on `job.calibration()`; `layers`
    (indices of the model's layers) stay float besides the policy's parts."""
    plan = int8_plan(job, layers)
    with atomic_path(job.path) as tmp:  # a file there stays whole until the quantized one has its metadata
        quantize_onnx(plan.trace, tmp, plan.calibration.batches, keep_float=plan.keep_float)
        rewrite_metadata(tmp, plan.metadata(job, METHOD))


def write_float(job: ExportJob, path: Path) -> Path:
    """The float ONNX file that `job`'s INT8 file is checked against, at `path`: the fp32 trace with metadata."""
    onnx = require("onnx", purpose=PURPOSE)
    proto = onnx.load(str(job.fp32_onnx()))
    embed_metadata(proto, job.metadata)
    with atomic_path(path) as tmp:
        onnx.save(proto, str(tmp))
    return path


def rewrite_metadata(path: Path, metadata: ExportMetadata) -> None:
    """Replaces the metadata of the ONNX file at `path`."""
    onnx = require("onnx", purpose=PURPOSE)
    proto = onnx.load(str(path))
    embed_metadata(proto, metadata)
    with atomic_path(path) as tmp:
        onnx.save(proto, str(tmp))

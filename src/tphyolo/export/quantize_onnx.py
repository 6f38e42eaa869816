"""INT8 ONNX by ONNX Runtime's static quantization in QDQ format: a float ONNX file and calibration batches in,
a quantized ONNX file out.

The float graph is first prepared as ONNX Runtime recommends (`quant_pre_process`: shape inference and the
basic graph optimisations). Calibration runs it on the batches and records each activation's range (min/max);
QuantizeLinear/DequantizeLinear pairs are then inserted around the inputs of the quantized operation types
(`OP_TYPES`: convolutions and matrix products): uint8 activations, asymmetric per tensor; int8 weights,
symmetric per output channel, in 7 bits (`reduce_range`) so that the vpmaddubsw kernels of x86 CPUs without
VNNI cannot saturate their 16-bit sums. ONNX Runtime fuses each Q/DQ group into an integer kernel when it loads
the file. Nodes whose names match `keep_float` (regular expressions searched in the names) stay float.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from tphyolo.export.extras import require
from tphyolo.export.quantize_openvino import model_input

OP_TYPES = ("Conv", "MatMul", "Gemm")


def quantize_onnx(
    float_path: Path,
    out_path: Path,
    calibration: Sequence[np.ndarray],
    *,
    keep_float: Sequence[str] = (),
    reduce_range: bool = True,
    activations_only_with_const_weights: bool = False,
) -> Path:
    """Writes the INT8 QDQ model of the float ONNX file `float_path` to `out_path`, calibrated on the batches
    of `calibration` (uint8 RGB images (B, 3, H, W), letterboxed as the model sees them). `keep_float`:
    node-name patterns left in float (ValueError when one matches no node).
    `activations_only_with_const_weights`: quantize only the matrix products whose second input is a weight
    (attention's products of two activations stay float).
    Metadata of the float file is not carried over; the caller writes it. Returns `out_path`."""
    onnx = require("onnx", purpose="INT8 ONNX export")
    quantization = require("onnxruntime.quantization", purpose="INT8 ONNX export")
    with tempfile.TemporaryDirectory(prefix="tphyolo-int8-") as tmp:
        prepared = Path(tmp) / "prepared.onnx"
        quantization.quant_pre_process(str(float_path), str(prepared), skip_symbolic_shape=True)
        graph = onnx.load(str(prepared)).graph
        input_name = graph.input[0].name
        stale = [p for p in keep_float if not any(re.search(p, node.name) for node in graph.node)]
        if stale:
            raise ValueError(f"{float_path}: keep-float pattern(s) {stale} match no node of the model")
        excluded = [node.name for node in graph.node if any(re.search(p, node.name) for p in keep_float)]
        quantization.quantize_static(
            str(prepared),
            str(out_path),
            _Reader(quantization.CalibrationDataReader, input_name, calibration),
            quant_format=quantization.QuantFormat.QDQ,
            op_types_to_quantize=list(OP_TYPES),
            per_channel=True,
            reduce_range=reduce_range,
            activation_type=quantization.QuantType.QUInt8,
            weight_type=quantization.QuantType.QInt8,
            nodes_to_exclude=excluded,
            calibrate_method=quantization.CalibrationMethod.MinMax,
            extra_options={"MatMulConstBOnly": activations_only_with_const_weights},
        )
    return out_path


def _Reader(base: type, input_name: str, batches: Sequence[np.ndarray]):  # noqa: ANN202, N802
    """A CalibrationDataReader (`base`, ONNX Runtime's abstract class) feeding `batches` once."""

    class Reader(base):
        def __init__(self) -> None:
            self.batches: Iterator[np.ndarray] = iter(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            batch = next(self.batches, None)
            return None if batch is None else {input_name: model_input(batch)}

    return Reader()

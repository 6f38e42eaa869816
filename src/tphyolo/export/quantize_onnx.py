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

ONNX Runtime also quantizes the output of each convolution it quantizes (so that its integer kernels write
int8), before the activation, and every reader of a quantized tensor reads it dequantized, excluded nodes too. A
layer that the accuracy check's retries keep float (`float_inputs`) would then still read rounded values: the
output of the convolution before it, rounded per tensor before its activation. For those nodes the Q/DQ pairs
upstream of their inputs (through operations that are not quantized) are bypassed by every reader that is not
a quantized operation; quantized readers keep reading the pair, so the producing convolution keeps its int8
inputs and weights but computes its output in float.

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
from tphyolo.export.int8_policy import QUANTIZED_OPS, float_nodes, int8_plan
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
    float_inputs: Sequence[str] = (),
    reduce_range: bool = True,
    calibrate_method: str = "MinMax",
) -> Path:
    """Writes the INT8 QDQ model of the float ONNX file `float_path` to `out_path`, calibrated on the batches
    of `calibration` (uint8 RGB images (B, 3, H, W), letterboxed as the model sees them). `keep_float`: node
    names left in float (ValueError for a name the graph lacks); `float_inputs`: those of them that read float
    values too (see the module docstring). `calibrate_method`: how ranges are chosen
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
        if float_inputs:
            quantized = onnx.load(str(out_path))
            read_float_inputs(quantized.graph, float_inputs, keep_float=set(keep_float))
            onnx.save(quantized, str(out_path))
    return out_path


def read_float_inputs(graph, nodes: Sequence[str], *, keep_float: set[str]) -> None:  # noqa: ANN001 - a GraphProto
    """Makes the `nodes` of the QDQ `graph` read float values (in place; see the module docstring): each Q/DQ
    pair found upstream of their inputs, through operations that are neither quantized nor a pair, is bypassed by
    its readers that are not quantized (float operations and the nodes of `keep_float`), and removed when no
    reader is left."""
    producer = {out: node for node in graph.node for out in node.output}
    pairs, seen, starts = {}, set(), set(nodes)
    pending = [tensor for node in graph.node if node.name in starts for tensor in node.input]
    while pending:
        tensor = pending.pop()
        node = producer.get(tensor)
        if node is None or tensor in seen:  # a graph input or an initializer, or walked already
            continue
        seen.add(tensor)
        source = producer.get(node.input[0]) if node.op_type == "DequantizeLinear" else None
        if source is not None and source.op_type == "QuantizeLinear":
            pairs[node.output[0]] = (source, node)
        elif node.op_type not in (*QUANTIZED_OPS, "QuantizeLinear", "DequantizeLinear"):
            pending.extend(node.input)
    for dequantized, (quantize, dequantize) in pairs.items():
        for reader in graph.node:
            if reader.op_type not in QUANTIZED_OPS or reader.name in keep_float:
                reader.input[:] = [quantize.input[0] if name == dequantized else name for name in reader.input]
        outputs = {output.name for output in graph.output}
        if dequantized not in outputs and not any(dequantized in reader.input for reader in graph.node):
            graph.node.remove(dequantize)
            if not any(quantize.output[0] in reader.input for reader in graph.node):
                graph.node.remove(quantize)


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
        layer_nodes = float_nodes(plan.trace, job.model, (), layers) if layers else ()
        quantize_onnx(plan.trace, tmp, plan.calibration.batches, keep_float=plan.keep_float, float_inputs=layer_nodes)
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

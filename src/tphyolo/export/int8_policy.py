"""What an INT8 export keeps in floating point, per model family, and why; the ONNX nodes that this selects.

Both quantizers (`quantize_openvino`, `quantize_onnx`) quantize the inputs and weights of convolutions and
matrix products only; everything between them (SiLU, concatenations, upsampling, LayerNorm, softmax, the detect
head's decoding into pixels and scores) computes in float on dequantized values. On top of that, a family's
policy names parts of the model that keep float inputs and weights too (`FLOAT_PARTS`):

- `head-convs`: the detect head's output convolutions, whose outputs are the box offsets and the logits of
  objectness and classes. Their int8 rounding moves boxes by whole pixels on the finest level and shifts the
  scores that decide between confusable classes; they are a few percent of the compute.
- `attention-products`: products of two activations (attention's queries times keys, weights times values):
  per-tensor int8 activations on both sides round the small scores that the softmax spreads; at 20x20 tokens
  they are a small share of the work.

The measured effect of each part per family (mAP and box error against the float model) is in docs/int8.md;
`FAMILY_POLICIES` holds what that measurement chose. `transformer`: NNCF's transformer model type (SmoothQuant
on the matrix products of attention; no quantizers on elementwise operations).

When the accuracy check finds the INT8 file losing more than `--max-drop`, whole layers (modules of the model,
`model.<i>`) are kept in float as well, one more per try, in `sensitive_layers` order: the layers that feed the
finest detection level (stride 4 in TPH-YOLOv5: the small objects' level), nearest the head first, following
the model's connections backwards. The first try that passes is kept (docs/int8.md).

Every INT8 writer starts from the same `Int8Plan` (`int8_plan(job, layers)`): the family's policy, the fp32 ONNX
trace, the calibration batches and the trace's nodes that stay float; and ends with the same metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from torch import nn

from tphyolo.errors import InputError
from tphyolo.imports import require
from tphyolo.models.attention import C3TR
from tphyolo.models.cbam import CBAM
from tphyolo.models.clla import CLLADetect
from tphyolo.models.model import DetectionModel
from tphyolo.models.swin import C3STR

if TYPE_CHECKING:
    from tphyolo.export.calibration import Calibration
    from tphyolo.export.writer_api import ExportJob
    from tphyolo.infer.backends.metadata import ExportMetadata


@dataclass(frozen=True)
class Int8Policy:
    """float_parts: names of `FLOAT_PARTS` kept in floating point; transformer: NNCF's transformer model type."""

    float_parts: tuple[str, ...]
    transformer: bool


FAMILY_POLICIES: dict[str, Int8Policy] = {
    "yolov5": Int8Policy(float_parts=("head-convs",), transformer=False),
    "tph-yolov5": Int8Policy(float_parts=("head-convs",), transformer=True),
    "tph-yolov5-swin": Int8Policy(float_parts=("head-convs",), transformer=True),
    "tph-yolov5pp": Int8Policy(float_parts=("head-convs",), transformer=True),
}


def model_family(model: nn.Module) -> str:
    """The family of a detection model, judged by its layers (a checkpoint's name may be anything): a CLLA
    head is TPH-YOLOv5++, Swin blocks without it TPH-YOLOv5-Swin, transformer or CBAM blocks TPH-YOLOv5."""
    kinds = {type(m) for m in model.modules()}
    if CLLADetect in kinds:
        return "tph-yolov5pp"
    if C3STR in kinds:
        return "tph-yolov5-swin"
    if C3TR in kinds or CBAM in kinds:
        return "tph-yolov5"
    return "yolov5"


def int8_policy(model: nn.Module) -> Int8Policy:
    return FAMILY_POLICIES[model_family(model)]


def _head_convs(graph, model: DetectionModel) -> list[str]:  # noqa: ANN001 - an onnx.GraphProto
    """Conv nodes whose weight is one of the head's output convolutions (initializers keep parameter names)."""
    names = {id(m): name for name, m in model.named_modules()}
    weights = {f"{names[id(conv)]}.weight" for conv in model.head.output_convs()}
    return [node.name for node in graph.node if node.op_type == "Conv" and node.input[1] in weights]


def _attention_products(graph, model: DetectionModel) -> list[str]:  # noqa: ANN001, ARG001
    """MatMul nodes with no constant input: products of two activations."""
    constants = {init.name for init in graph.initializer}
    constants |= {out for node in graph.node if node.op_type == "Constant" for out in node.output}
    return [
        node.name
        for node in graph.node
        if node.op_type == "MatMul" and not any(name in constants for name in node.input)
    ]


FLOAT_PARTS: dict[str, Callable] = {
    "head-convs": _head_convs,
    "attention-products": _attention_products,
}


QUANTIZED_OPS = ("Conv", "MatMul", "Gemm")  # the operation types both quantizers quantize
MAX_FLOAT_LAYERS = 8  # the most layers the accuracy check's retries keep in float


def sensitive_layers(model: DetectionModel, limit: int = MAX_FLOAT_LAYERS) -> list[int]:
    """Up to `limit` indices of `model.model` in the order the accuracy check keeps them in float: breadth-first
    from the head's finest input backwards along the layers' inputs (see the module docstring), leaving out
    layers without convolutions or linear layers (concatenations, upsampling: nothing of theirs is quantized)."""
    head_inputs = model.sources[-1]
    order: list[int] = []
    seen: set[int] = set()
    queue = [head_inputs[0] if isinstance(head_inputs, tuple) else head_inputs]
    while queue and len(order) < limit:
        index = queue.pop(0)
        if index < 0 or index in seen:
            continue
        seen.add(index)
        if any(isinstance(m, (nn.Conv2d, nn.Linear)) for m in model.model[index].modules()):
            order.append(index)
        source = model.sources[index]
        queue.extend(source if isinstance(source, tuple) else (index - 1 if source == -1 else source,))
    return order


def layer_name(model: DetectionModel, index: int) -> str:
    """How reports name a layer: `model.<i> (<type>)`."""
    return f"model.{index} ({type(model.model[index]).__name__})"


def float_nodes(
    onnx_path: Path, model: DetectionModel, parts: tuple[str, ...], layers: tuple[int, ...] = ()
) -> list[str]:
    """The names of the nodes of the ONNX trace `onnx_path` of `model` that `parts` keep in float, and the
    quantized operations of the `layers` (indices of `model.model`), in graph order. ValueError for an unknown
    part."""
    unknown = [p for p in parts if p not in FLOAT_PARTS]
    if unknown:
        raise InputError(f"unknown float part(s) {unknown}; known: {list(FLOAT_PARTS)}")
    onnx = require("onnx", purpose="INT8 export")
    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    chosen = {name for part in parts for name in FLOAT_PARTS[part](graph, model)}
    prefixes = tuple(f"/model.{i}/" for i in layers)
    chosen |= {node.name for node in graph.node if node.op_type in QUANTIZED_OPS and node.name.startswith(prefixes)}
    return [node.name for node in graph.node if node.name in chosen]


@dataclass(frozen=True)
class Int8Plan:
    """What an INT8 writer quantizes: the family's `policy`, the fp32 ONNX `trace` of the model, the
    `calibration` batches, the names of the trace's nodes that `keep_float` (in graph order) and the `layers`
    kept in float beyond the policy's parts (`model.<i>`)."""

    policy: Int8Policy
    trace: Path
    calibration: Calibration
    keep_float: tuple[str, ...]
    layers: tuple[str, ...] = ()

    def metadata(self, job: ExportJob, method: str) -> ExportMetadata:
        """`job`'s metadata with the INT8 fields: quantized by `method`, what stayed float (the policy's parts,
        then the layers kept in float) and the calibration."""
        return replace(job.metadata, int8=True, int8_method=method,
                       int8_float_parts=(*self.policy.float_parts, *self.layers),
                       int8_calibration=self.calibration.description)  # fmt: skip


def int8_plan(job: ExportJob, layers: tuple[int, ...] = ()) -> Int8Plan:
    """The plan of `job`'s INT8 file: its model's policy, the fp32 trace (traced once per job), the calibration
    batches (read once per job) and the nodes the policy keeps float, with those of `layers` (indices of the
    model's layers)."""
    policy = int8_policy(job.model)
    trace = job.fp32_onnx()
    calibration = job.calibration()
    keep = tuple(float_nodes(trace, job.model, policy.float_parts, layers))
    return Int8Plan(policy, trace, calibration, keep, tuple(f"model.{i}" for i in layers))

"""INT8 OpenVINO IR (`--format openvino --int8`) by NNCF post-training quantization of the float model.

What NNCF does here: it runs the float model on the calibration batches, records the range of every activation
that feeds a convolution or matrix product, and inserts FakeQuantize operations (int8 weights, symmetric per
output channel; activations per tensor, asymmetric: the `mixed` preset, as SiLU outputs are not symmetric)
that the CPU plugin executes as integer kernels; a fast bias correction then moves each layer's mean output
back to the float model's. Nodes named in `keep_float` (ONNX node names of the trace, which OpenVINO keeps as
its operations' names) keep float inputs and weights; `transformer` selects NNCF's transformer model type
(SmoothQuant on attention's matrix products; softmax, LayerNorm and elementwise operations left in float).
The writer takes both from the family's policy (`tphyolo.export.int8_policy`). Weights are stored in 7 bits in
every layer (`overflow_fix`), which CPUs without VNNI need.

The IR is written as `W_int8_openvino_model/` with the metadata of the float IR plus the `int8_*` fields.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tphyolo.errors import InputError
from tphyolo.export.config import CALIBRATION_RANGES
from tphyolo.export.int8_policy import int8_plan
from tphyolo.export.openvino_ir import export_openvino, save_ir
from tphyolo.imports import require
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.openvino import ir_file

if TYPE_CHECKING:
    import torch

    from tphyolo.export.config import ExportConfig
    from tphyolo.export.writer_api import ExportJob

PURPOSE = "--int8 OpenVINO export"


def quantize_openvino(
    model_path: Path,
    calibration: Sequence[np.ndarray],
    *,
    keep_float: Sequence[str] = (),
    transformer: bool = False,
    overflow_fix: str = "enable",
    activation_ranges: str = "mean",
    smooth_quant: bool = True,
):  # noqa: ANN201 - an openvino.Model; openvino is imported at call time
    """The INT8 `openvino.Model` of the float model at `model_path` (.onnx or .xml), calibrated on the batches
    of `calibration`: uint8 RGB images (B, 3, H, W), letterboxed as the model sees them (NNCF reads them more
    than once). `keep_float`: node names kept in float (ValueError for a name the model lacks: a stale
    policy). `overflow_fix`: NNCF's fix of the int8 saturation of CPUs without VNNI ("enable",
    "first_layer_only", "disable"): weights in 7 bits, so that the 16-bit sums of vpmaddubsw cannot
    saturate. NNCF fixes the first layer only by default; on this project's AVX2 CPU that lost 0.024 mAP50
    of the main job's tph-yolov5n where fixing every layer lost 0.006 (docs/int8.md), so every layer is
    fixed. `activation_ranges`: "mean" (the mean over images of each image's minimum and maximum, NNCF's
    default: it clips what only some images reach, and keeps finer steps for the rest) or "global" (the
    smallest minimum and largest maximum over the images, as ONNX Runtime's min/max); which loses less varies
    by model (docs/int8.md). `smooth_quant`: with `transformer`, SmoothQuant on the matrix products (a second
    pass over the calibration images; off only to measure what it buys). MissingExtraError when nncf or
    openvino is missing."""
    ov = require("openvino", purpose=PURPOSE)
    nncf = require("nncf", purpose=PURPOSE)
    advanced = require("nncf.quantization.advanced_parameters", purpose=PURPOSE)
    model = ov.Core().read_model(str(model_path))
    input_name = model.inputs[0].get_any_name()
    names = {op.get_friendly_name() for op in model.get_ops()}
    missing = [name for name in keep_float if name not in names]
    if missing:
        raise InputError(f"{model_path}: no operation named {missing} to keep in float")
    # A Conv node becomes a Convolution named "<name>/WithoutBiases" and an Add named "<name>".
    patterns = [f"^{re.escape(name)}(/WithoutBiases)?$" for name in keep_float]
    dataset = nncf.Dataset(list(calibration), lambda images: {input_name: model_input(images)})
    smoothing = advanced.AdvancedSmoothQuantParameters()  # NNCF's alphas; -1 for matrix products turns it off
    if not smooth_quant:
        smoothing = replace(smoothing, matmul=-1)
    with _nncf_warnings_only():
        return nncf.quantize(
            model,
            dataset,
            subset_size=len(calibration),
            model_type=nncf.ModelType.TRANSFORMER if transformer else None,
            preset=nncf.QuantizationPreset.MIXED,
            ignored_scope=nncf.IgnoredScope(patterns=patterns) if patterns else None,
            advanced_parameters=advanced.AdvancedQuantizationParameters(
                overflow_fix=advanced.OverflowFix(overflow_fix),
                activations_range_estimator_params=_activation_ranges(activation_ranges),
                smooth_quant_alphas=smoothing,
            ),
        )


def _activation_ranges(kind: str):  # noqa: ANN202 - an nncf RangeEstimatorParameters
    if kind not in CALIBRATION_RANGES:
        raise InputError(f"activation ranges must be one of {list(CALIBRATION_RANGES)}, got {kind!r}")
    ranges = require("nncf.quantization.range_estimator", purpose=PURPOSE).RangeEstimatorParametersSet
    return ranges.MEAN_MINMAX if kind == "mean" else ranges.MINMAX


def model_input(images: np.ndarray) -> np.ndarray:
    """uint8 (B, 3, H, W) images -> the exported model's input: float32 in [0, 1], as `ExportedBackend.prepare`."""
    return images.astype(np.float32) / np.float32(255)


class _nncf_warnings_only:  # noqa: N801 - a context manager
    """NNCF logs notes at INFO; within, only its warnings and errors are shown (its progress bars stay)."""

    def __enter__(self) -> None:
        self.logger = logging.getLogger("nncf")
        self.level = self.logger.level
        self.logger.setLevel(logging.WARNING)

    def __exit__(self, *exc: object) -> None:
        self.logger.setLevel(self.level)


def method(transformer: bool, activation_ranges: str = "mean") -> str:
    model_type = ", transformer model type" if transformer else ""
    return f"NNCF post-training quantization, mixed preset{model_type}, {activation_ranges} activation ranges"


def check(cfg: ExportConfig, device: torch.device) -> None:
    """MissingExtraError (one line, naming the extra) when openvino or nncf is not installed."""
    require("openvino", purpose=PURPOSE)
    require("nncf", purpose=PURPOSE)


def write(job: ExportJob, layers: tuple[int, ...] = ()) -> None:
    """The INT8 IR folder of `job`, quantized from the fp32 ONNX trace on `job.calibration()`; `layers`
    (indices of the model's layers) stay float besides the policy's parts."""
    plan, ranges = int8_plan(job, layers), job.cfg.calib_ranges
    model = quantize_openvino(plan.trace, plan.calibration.batches, keep_float=plan.keep_float,
                              transformer=plan.policy.transformer, activation_ranges=ranges)  # fmt: skip
    save_ir(model, job.path, metadata=plan.metadata(job, method(plan.policy.transformer, ranges)))


def write_float(job: ExportJob, folder: Path) -> Path:
    """The float IR that `job`'s INT8 IR is checked against, in `folder`."""
    return export_openvino(job.fp32_onnx(), folder, metadata=job.metadata)


def rewrite_metadata(folder: Path, metadata: ExportMetadata) -> None:
    """Replaces the metadata of the IR in `folder` (the accuracy check's numbers added). The IR is written
    beside it and its files moved over the old ones: OpenVINO maps the weights file into memory, and
    overwriting it in place would pull the pages from under a model still loaded from it."""
    ov = require("openvino", purpose=PURPOSE)
    model = ov.Core().read_model(str(ir_file(folder)))
    with tempfile.TemporaryDirectory(prefix=".int8-", dir=folder.parent) as tmp:
        written = save_ir(model, Path(tmp) / folder.name, metadata=metadata)
        for file in written.iterdir():
            os.replace(file, folder / file.name)

"""INT8 OpenVINO IR by NNCF post-training quantization: a float model (ONNX file or IR) and calibration batches
in, a quantized `openvino.Model` out (written by `tphyolo.export.openvino.save_ir`).

What NNCF does here: it runs the float model on the calibration batches, records the range of every activation
that feeds a convolution or matrix product, and inserts FakeQuantize operations (int8 weights, symmetric per
output channel; uint8/int8 activations per tensor) that the CPU plugin executes as integer kernels; a fast bias
correction then moves each layer's mean output back to the float model's. Operations whose node names match
`keep_float` (regular expressions searched in the names, which are the ONNX node names of the export, e.g.
`/model.24/m.0/Conv`) keep float inputs and weights; `transformer` selects NNCF's transformer model type
(attention's MatMuls quantized with SmoothQuant, softmax, LayerNorm and elementwise operations left in float).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tphyolo.export.extras import require

INT8_INSTALL = 'pip install "tphyolo[export]"'  # nncf is in the export extra


def quantize_openvino(
    model_path: Path,
    calibration: Sequence[np.ndarray],
    *,
    keep_float: Sequence[str] = (),
    transformer: bool = False,
    overflow_fix: str = "first_layer_only",
):  # noqa: ANN201 - an openvino.Model; openvino is imported at call time
    """The INT8 `openvino.Model` of the float model at `model_path` (.onnx or .xml), calibrated on the batches
    of `calibration`: uint8 RGB images (B, 3, H, W), letterboxed as the model sees them (NNCF reads them
    more than once).
    `keep_float`: node-name patterns kept in float (each must match some node: a pattern that matches nothing
    is a stale policy, ValueError). `overflow_fix`: NNCF's fix of the int8 saturation of CPUs without VNNI
    ("enable", "first_layer_only", "disable"). MissingExtraError when nncf or openvino is missing."""
    ov = require("openvino", purpose="INT8 OpenVINO export", install=INT8_INSTALL)
    nncf = require("nncf", purpose="INT8 OpenVINO export", install=INT8_INSTALL)
    advanced = require("nncf.quantization.advanced_parameters", purpose="INT8 OpenVINO export", install=INT8_INSTALL)
    model = ov.Core().read_model(str(model_path))
    input_name = model.inputs[0].get_any_name()
    names = {op.get_friendly_name() for op in model.get_ops()}
    stale = [p for p in keep_float if not any(_search(p, name) for name in names)]
    if stale:
        raise ValueError(f"{model_path}: keep-float pattern(s) {stale} match no operation of the model")
    dataset = nncf.Dataset(calibration, lambda images: {input_name: model_input(images)})
    with _quiet_nncf():
        return nncf.quantize(
            model,
            dataset,
            subset_size=len(calibration),
            model_type=nncf.ModelType.TRANSFORMER if transformer else None,
            preset=nncf.QuantizationPreset.MIXED,
            ignored_scope=nncf.IgnoredScope(patterns=list(keep_float), validate=False) if keep_float else None,
            advanced_parameters=advanced.AdvancedQuantizationParameters(
                overflow_fix=advanced.OverflowFix(overflow_fix)
            ),
        )


def model_input(images: np.ndarray) -> np.ndarray:
    """uint8 (B, 3, H, W) images -> the exported model's input: float32 in [0, 1], as `ExportedBackend.prepare`."""
    return images.astype(np.float32) / np.float32(255)


def _search(pattern: str, name: str) -> bool:
    import re

    return re.search(pattern, name) is not None


class _quiet_nncf:  # noqa: N801 - used as a context manager
    """NNCF logs its own progress bars and notes at INFO; within, only its warnings and errors are shown."""

    def __enter__(self) -> None:
        self.logger = logging.getLogger("nncf")
        self.level = self.logger.level
        self.logger.setLevel(logging.WARNING)

    def __exit__(self, *exc: object) -> None:
        self.logger.setLevel(self.level)

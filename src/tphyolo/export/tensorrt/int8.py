"""INT8 TensorRT engine (`--format engine --int8`): built from the fp32 ONNX trace with TensorRT's entropy
calibrator on a CUDA device.

TensorRT runs the network on the calibration batches, picks each activation's int8 range by minimising the
information lost (entropy calibration, version 2) and chooses int8 or fp32 kernels per layer, whichever is
faster. The layers of the family's float parts (`tphyolo.export.int8_policy`; TensorRT names a layer after
its ONNX node) are held in fp32 by a precision constraint. Calibration batches have the engine's export
size: those of a dynamic export (each letterboxed to the smallest stride multiple) are padded to the square
with the letterbox's grey, as a fixed-size letterbox would be.

tphyolo does not run engines, so the accuracy check is not run for this format. Not run yet: no machine this
project was measured on had a GPU, and no test or benchmark builds an INT8 engine (docs/int8.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from tphyolo.data.letterbox import PAD_VALUE
from tphyolo.export.int8_policy import int8_plan
from tphyolo.export.quantize_openvino import model_input
from tphyolo.export.tensorrt.engine import check_tensorrt, export_engine, write_engine_file
from tphyolo.infer.backends.metadata import ExportMetadata

if TYPE_CHECKING:
    from tphyolo.export.config import ExportConfig
    from tphyolo.export.writer_api import WriterJob

METHOD = "TensorRT entropy calibration (IInt8EntropyCalibrator2)"


def padded_to(batch: np.ndarray, height: int, width: int) -> np.ndarray:
    """uint8 (B, 3, h, w) with h <= height, w <= width -> (B, 3, height, width), centred on grey padding."""
    b, c, h, w = batch.shape
    out = np.full((b, c, height, width), PAD_VALUE, dtype=np.uint8)
    top, left = (height - h) // 2, (width - w) // 2
    out[:, :, top : top + h, left : left + w] = batch
    return out


def entropy_calibrator(trt, batches: list[np.ndarray], device: torch.device):  # noqa: ANN001, ANN201
    """A `trt.IInt8EntropyCalibrator2` feeding `batches` (uint8 (B, 3, H, W), one shape) from `device`."""

    class Calibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            super().__init__()
            self.left = iter(batches)
            self.current: torch.Tensor | None = None  # kept alive while TensorRT reads it

        def get_batch_size(self) -> int:
            return len(batches[0])

        def get_batch(self, names: list[str]) -> list[int] | None:  # noqa: ARG002 - one input
            batch = next(self.left, None)
            if batch is None:
                return None
            self.current = torch.from_numpy(model_input(batch)).to(device).contiguous()
            return [int(self.current.data_ptr())]

        def read_calibration_cache(self) -> None:
            return None

        def write_calibration_cache(self, cache: bytes) -> None:
            pass

    return Calibrator()


def check(cfg: ExportConfig, device: torch.device) -> None:
    """ValueError (one line) without a CUDA device or the tensorrt package."""
    check_tensorrt(device)


def write(job: WriterJob) -> None:
    """The INT8 engine of `job`: the fp32 ONNX trace calibrated on `job.calibration()`."""
    plan = int8_plan(job)
    keep = set(plan.keep_float)
    h, w = job.metadata.imgsz
    batches = [padded_to(batch, h, w) for batch in plan.calibration.batches]

    def configure(trt, network, config, profile) -> None:  # noqa: ANN001
        config.set_flag(trt.BuilderFlag.INT8)
        config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
        config.int8_calibrator = entropy_calibrator(trt, batches, job.device)
        if profile is not None:
            config.set_calibration_profile(profile)
        for i in range(network.num_layers):
            layer = network.get_layer(i)
            if layer.name in keep:
                layer.precision = trt.float32

    export_engine(plan.trace, job.path, metadata=plan.metadata(job, METHOD), device=job.device, half=False,
                  configure=configure)  # fmt: skip


def write_float(job: WriterJob, path: Path) -> Path:
    """The fp32 engine that `job`'s INT8 engine compares with."""
    return export_engine(job.fp32_onnx(), path, metadata=job.metadata, device=job.device, half=False)


def rewrite_metadata(path: Path, metadata: ExportMetadata) -> None:
    """Replaces the metadata prefix of the engine file at `path`."""
    data = path.read_bytes()
    (length,) = np.frombuffer(data[:4], dtype="<u4")
    write_engine_file(path, metadata, data[4 + int(length) :])

"""ONNX Runtime backend for `.onnx` exports: the CPU provider, or CUDA with onnxruntime-gpu.

Session options: every graph optimisation (ORT_ENABLE_ALL), intra-op threads = the cores this process may
use (or `threads`), one inter-op thread, sequential execution: what is fastest for one model at a time.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tphyolo.cores import available_cores
from tphyolo.errors import InputError
from tphyolo.imports import require
from tphyolo.infer.backends.base import ExportedBackend, check_format, error_reason
from tphyolo.infer.backends.metadata import ExportMetadata


class OnnxRuntimeBackend(ExportedBackend):
    """An ONNX export run by ONNX Runtime on `device` (cpu, or cuda with the CUDA provider)."""

    format = "onnx"
    suffix = ".onnx"

    def __init__(self, path: Path, *, device: torch.device, threads: int | None = None) -> None:
        ort = require("onnxruntime", purpose="running ONNX models")
        errors = require("onnxruntime.capi.onnxruntime_pybind11_state", purpose="running ONNX models")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.intra_op_num_threads = threads or available_cores()
        options.inter_op_num_threads = 1
        options.log_severity_level = 4  # fatal only: a failed run raises, and the caller says why in one line
        providers = ["CPUExecutionProvider"]
        if device.type == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise InputError(f"{path}: onnxruntime has no CUDA provider here; install onnxruntime-gpu or use cpu")
            providers = [("CUDAExecutionProvider", {"device_id": device.index or 0}), *providers]
        unreadable = (errors.Fail, errors.InvalidArgument, errors.InvalidProtobuf, errors.InvalidGraph,
                      errors.NoModel, errors.NotImplemented, errors.RuntimeException)  # fmt: skip
        if path.is_file() and path.stat().st_size == 0:
            raise InputError(f"{path}: an empty file, not an ONNX model")
        try:
            self.session = ort.InferenceSession(str(path), options, providers=providers)
        except unreadable as error:
            reason = error_reason(error)
            raise InputError(f"{path}: not a readable ONNX model (truncated or corrupt?): {reason}") from error
        metadata = ExportMetadata.from_strings(self.session.get_modelmeta().custom_metadata_map, source=str(path))
        check_format(metadata, "onnx", path)
        metadata.check_graph(str(path), input_shape=_dims(self.session.get_inputs()[0].shape),
                             output_shape=_dims(self.session.get_outputs()[0].shape))  # fmt: skip
        if metadata.dtype == "float16" and device.type != "cuda":
            raise InputError(f"{path}: an fp16 export runs on CUDA only; ONNX Runtime's CPU provider needs fp32")
        super().__init__(path, metadata, device)
        self.input_name = self.session.get_inputs()[0].name

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        (out,) = self.session.run(None, {self.input_name: x.cpu().numpy()})
        return torch.from_numpy(out)


def _dims(shape: list) -> list[int | None]:
    """An ONNX Runtime shape with its free dimensions (names or None) as None."""
    return [dim if isinstance(dim, int) else None for dim in shape]

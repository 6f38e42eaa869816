"""Export to a TensorRT engine (`--format engine`): built from the ONNX export, on a CUDA device, with the
tensorrt package. Elsewhere, `check_tensorrt` refuses in one line saying what is missing.

File layout: a 4-byte little-endian length, the metadata JSON, then the serialized engine (see
`tphyolo.infer.backends.metadata`). With `dynamic`, one optimisation profile covers batch 1..`max_batch` and sides
from one stride to `max_side`, tuned for the export size.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import torch

from tphyolo.data.files.atomic import write_bytes_atomic
from tphyolo.errors import InputError
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.onnx_trace import INPUT_NAME

if TYPE_CHECKING:
    from tphyolo.export.config import ExportConfig
    from tphyolo.export.writer_api import ExportJob

TENSORRT_INSTALL = "pip install tensorrt (on a machine with an NVIDIA GPU)"
WORKSPACE_BYTES = 4 << 30


def check_tensorrt(device: torch.device) -> ModuleType:
    """The tensorrt module, or ValueError in one line naming what is missing (a CUDA device, the package)."""
    missing = []
    if device.type != "cuda" or not torch.cuda.is_available():
        missing.append(f"a CUDA device (export device is {device}; pass --device 0)")
    try:
        import tensorrt
    except ImportError:
        missing.append(f"the tensorrt package ({TENSORRT_INSTALL})")
        tensorrt = None
    if missing:
        raise InputError(f"TensorRT export needs {' and '.join(missing)}")
    return tensorrt


def export_engine(
    onnx_path: Path,
    path: Path,
    *,
    metadata: ExportMetadata,
    device: torch.device,
    half: bool,
    max_batch: int = 16,
    max_side: int = 2048,
    configure: Callable | None = None,
) -> Path:
    """Builds an engine from the ONNX file `onnx_path` (fp32) and writes it, prefixed by `metadata`, to
    `path`; fp16 kernels when `half`. `configure(trt, network, config, profile)` may change the build
    (INT8 calibration: `tphyolo.export.tensorrt.int8`); `profile` is None for a fixed-size engine. Returns
    the path."""
    trt = check_tensorrt(device)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch: the only mode of TensorRT >= 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise InputError(f"{onnx_path}: TensorRT cannot parse the ONNX export: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    if half:
        config.set_flag(trt.BuilderFlag.FP16)
    profile = None
    if metadata.dynamic:
        (h, w), s = metadata.imgsz, metadata.stride
        largest = (max(max_batch, metadata.batch), 3, max(max_side, h), max(max_side, w))
        profile = builder.create_optimization_profile()
        profile.set_shape(INPUT_NAME, (1, 3, s, s), (metadata.batch, 3, h, w), largest)
        config.add_optimization_profile(profile)
    if configure is not None:
        configure(trt, network, config, profile)
    with torch.cuda.device(device):
        engine = builder.build_serialized_network(network, config)
    if engine is None:
        raise InputError(f"{onnx_path}: TensorRT could not build an engine (see its log above)")
    return write_engine_file(path, metadata, bytes(engine))


def write_engine_file(path: Path, metadata: ExportMetadata, engine: bytes) -> Path:
    """Writes the serialized `engine` to `path`, prefixed by `metadata` (the layout of the module docstring)."""
    header = metadata.to_json().encode()
    return write_bytes_atomic(path, struct.pack("<I", len(header)) + header + engine)


def check(cfg: ExportConfig, device: torch.device) -> None:
    """ValueError (one line) without a CUDA device or the tensorrt package."""
    check_tensorrt(device)


def write(job: ExportJob) -> None:
    """The engine of `job`, built from the fp32 ONNX trace (fp16 kernels with --half)."""
    export_engine(job.fp32_onnx(), job.path, metadata=job.metadata, device=job.device, half=job.cfg.half)

"""The export formats, one row each: the one table from which the `--format` choices, the file names, the
exporter's dispatch and the benchmarked runtimes are derived.

| format | written as | written by | run by (`tphyolo.infer.backends`) |
| --- | --- | --- | --- |
| `onnx` | `W.onnx` | `export.onnx_file` | ONNX Runtime (`onnxruntime`) |
| `openvino` | `W_openvino_model/` | `export.openvino_ir` (from the fp32 ONNX trace) | OpenVINO (`openvino`) |
| `torchscript` | `W.torchscript` | `export.torchscript_file` | TorchScript (`torchscript`) |
| `engine` | `W.engine` | `export.tensorrt_engine` (from the fp32 ONNX trace) | -- (written only) |

A new format is its writer module (with `check(cfg, device)` and `write(job)`), its backend (a class of
`tphyolo.infer.backends`, which also says what its files are called) and one row here. The rows are written in
table order, so that formats converted from the fp32 ONNX trace reuse the `onnx` file when it is written too.

This module imports no torch: the command line reads the choices from it cheaply.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from tphyolo.export.config import ExportConfig
    from tphyolo.infer.backends.metadata import ExportMetadata


@dataclass(frozen=True)
class ExportFormat:
    """One export format.

    name: the `--format` value and the `format` field of the file's metadata.
    writer: the module that writes it: `check(cfg, device)` refuses what cannot be done here before any
      tracing, `write(job)` writes `job.path`.
    backend: the key of `tphyolo.infer.backends.BACKENDS` whose class runs the file (and names its suffix);
      None for a format tphyolo writes but does not run.
    runtime: the name under which benchmarks list the runtime (`bench predict --backends`).
    suffix_written: the file's suffix, for a format without a backend (else the backend's, `suffix`).
    onnx_trace: the file written is the ONNX trace itself, which converters reuse when it is fp32.
    fp16_graph: `--half` makes the whole graph fp16 (such files run on CUDA only); otherwise the weights are
      stored in fp16 where the format can.
    """

    name: str
    writer: str
    backend: str | None = None
    runtime: str | None = None
    suffix_written: str | None = None
    onnx_trace: bool = False
    fp16_graph: bool = False

    def writer_module(self) -> ModuleType:
        return importlib.import_module(self.writer)

    @property
    def suffix(self) -> str:
        """What is appended to the weights' stem: `.onnx`, `_openvino_model` (a folder) ..."""
        if self.suffix_written is not None:
            return self.suffix_written
        from tphyolo.infer.backends import BACKENDS

        return BACKENDS[self.backend].suffix


FORMATS: tuple[ExportFormat, ...] = (
    ExportFormat(
        "onnx", "tphyolo.export.onnx_file", backend="onnx", runtime="onnxruntime", onnx_trace=True, fp16_graph=True
    ),
    ExportFormat("openvino", "tphyolo.export.openvino_ir", backend="openvino", runtime="openvino"),
    ExportFormat(
        "torchscript", "tphyolo.export.torchscript_file", backend="torchscript", runtime="torchscript", fp16_graph=True
    ),
    ExportFormat("engine", "tphyolo.export.tensorrt_engine", suffix_written=".engine"),
)
FORMAT_BY_NAME: dict[str, ExportFormat] = {f.name: f for f in FORMATS}
EXPORT_FORMATS: tuple[str, ...] = tuple(FORMAT_BY_NAME)
RUNTIMES: dict[str, str] = {f.runtime: f.name for f in FORMATS if f.runtime is not None}  # runtime -> format


@dataclass
class ExportJob:
    """What a writer gets: the fused fp32 `model` (and its fp16 copy on CUDA with `--half`, else None), the
    example input it is traced on, where to write, the metadata to embed, the config and the device, and
    `fp32_onnx()`: the fp32 ONNX trace of `model` (traced once, on first call) that converters start from."""

    model: torch.nn.Module
    fp16_model: torch.nn.Module | None
    example: torch.Tensor
    path: Path
    metadata: ExportMetadata
    cfg: ExportConfig
    device: torch.device
    fp32_onnx: Callable[[], Path]

    @property
    def fp16_graph(self) -> bool:
        """Whether this file is an fp16 graph (`--half` for a format with `fp16_graph`)."""
        return self.metadata.dtype == "float16"

    def traced(self) -> tuple[torch.nn.Module, torch.Tensor]:
        """The model and example input in the file's dtype: the fp16 copy for an fp16 graph."""
        return (self.fp16_model, self.example.half()) if self.fp16_graph else (self.model, self.example)

"""The export formats, one row each: the one table from which the `--format` choices, the file names, the
exporter's dispatch and the benchmarked runtimes are derived.

| format | written as | written by | run by (`tphyolo.infer.backends`) |
| --- | --- | --- | --- |
| `onnx` | `W.onnx` | `export.onnx_file` | ONNX Runtime (`onnxruntime`) |
| `openvino` | `W_openvino_model/` | `export.openvino_ir` (from the fp32 ONNX trace) | OpenVINO (`openvino`) |
| `torchscript` | `W.torchscript` | `export.torchscript_file` | TorchScript (`torchscript`) |
| `pt2` | `W.pt2` | `export.pt2_file` | torch.export (`pt2`) |
| `engine` | `W.engine` | `export.tensorrt.engine` (from the fp32 ONNX trace) | -- (written only) |

With `--int8` a format with an INT8 writer is quantized instead (`W_int8.onnx` by ONNX Runtime's static QDQ
quantization, `W_int8_openvino_model/` by NNCF, `W_int8.engine` by TensorRT's entropy calibrator), calibrated
on images of `--data` (see `tphyolo.export.calibration`); the INT8 file runs on the same backend as the float one, so
benchmarks list it as its runtime's `-int8` variant (`openvino-int8`, `onnxruntime-int8`).

A new format is its writer module (a `FormatWriter` of `tphyolo.export.writer_api`: `check(cfg, device)` and
`write(job)`; an INT8 writer is an `Int8Writer`, which also writes the float twin and rewrites the metadata), its
backend (a class of `tphyolo.infer.backends`, which also says what its files are called) and one row here. The
rows are written in table order, so that formats converted from the fp32 ONNX trace reuse the `onnx` file when it
is written too.

This module imports no torch: the command line reads the choices from it cheaply.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from tphyolo.errors import InputError

if TYPE_CHECKING:

    pass


@dataclass(frozen=True)
class ExportFormat:
    """One export format.

    name: the `--format` value and the `format` field of the file's metadata.
    writer: the dotted name of the module that writes it, a `FormatWriter`.
    backend: the key of `tphyolo.infer.backends.BACKENDS` whose class runs the file (and names its suffix);
      None for a format tphyolo writes but does not run.
    runtime: the name under which benchmarks list the runtime (`bench predict --backends`).
    suffix_written: the file's suffix, for a format without a backend (else the backend's, `suffix`).
    onnx_trace: the file written is the ONNX trace itself, which converters reuse when it is fp32.
    fp16_graph: `--half` makes the whole graph fp16 (such files run on CUDA only); otherwise the weights are
      stored in fp16 where the format can.
    int8_writer: the dotted name of the module that writes the INT8 file with `--int8`, an `Int8Writer`; None
      for a format without one.
    folder: its export is a folder (named W + suffix), not a file.
    note: a line the exporter prints before writing it ("" for none).
    """

    name: str
    writer: str
    backend: str | None = None
    runtime: str | None = None
    suffix_written: str | None = None
    onnx_trace: bool = False
    fp16_graph: bool = False
    int8_writer: str | None = None
    folder: bool = False
    note: str = ""

    def writer_module(self, *, int8: bool = False) -> ModuleType:
        """The module that writes this format (a `FormatWriter`), or its INT8 form (an `Int8Writer`; ValueError
        for a format without one)."""
        if not int8:
            return importlib.import_module(self.writer)
        if self.int8_writer is None:
            with_int8 = [f.name for f in FORMATS if f.int8_writer is not None]
            raise InputError(f"--int8: {self.name} has no INT8 form; formats with one: {', '.join(with_int8)}")
        return importlib.import_module(self.int8_writer)

    def file_suffix(self, *, int8: bool = False) -> str:
        """What is appended to the weights' stem for this format's file (`_int8` first for its INT8 form)."""
        return f"{INT8_INFIX if int8 else ''}{self.suffix}"

    @property
    def suffix(self) -> str:
        """What is appended to the weights' stem: `.onnx`, `_openvino_model` (a folder) ..."""
        if self.suffix_written is not None:
            return self.suffix_written
        from tphyolo.infer.backends import BACKENDS  # lazy: the table stays torch-free for `export -h`

        return BACKENDS[self.backend].suffix


INT8_INFIX = "_int8"  # W_int8.onnx, W_int8_openvino_model/: an INT8 file says so in its name

FORMATS: tuple[ExportFormat, ...] = (
    ExportFormat("onnx", "tphyolo.export.onnx_file", backend="onnx", runtime="onnxruntime", onnx_trace=True,
                 fp16_graph=True, int8_writer="tphyolo.export.quantize_onnx"),  # fmt: skip
    ExportFormat("openvino", "tphyolo.export.openvino_ir", backend="openvino", runtime="openvino",
                 int8_writer="tphyolo.export.quantize_openvino", folder=True),  # fmt: skip
    ExportFormat("torchscript", "tphyolo.export.torchscript_file", backend="torchscript", runtime="torchscript",
                 fp16_graph=True, note="PyTorch deprecates TorchScript; --format pt2 writes its successor, a "
                 "torch.export program"),  # fmt: skip
    ExportFormat("pt2", "tphyolo.export.pt2_file", backend="pt2", runtime="pt2", fp16_graph=True),
    ExportFormat("engine", "tphyolo.export.tensorrt.engine", suffix_written=".engine",
                 int8_writer="tphyolo.export.tensorrt.int8"),  # fmt: skip
)
FORMAT_BY_NAME: dict[str, ExportFormat] = {f.name: f for f in FORMATS}
EXPORT_FORMATS: tuple[str, ...] = tuple(FORMAT_BY_NAME)
INT8_FORMATS: tuple[str, ...] = tuple(f.name for f in FORMATS if f.int8_writer is not None)
INT8_RUNTIME_SUFFIX = "-int8"  # a runtime's INT8 files in `bench predict --backends`: openvino-int8
# runtime -> (format, INT8 form): what `bench predict --backends` names
RUNTIMES: dict[str, tuple[str, bool]] = {
    **{f.runtime: (f.name, False) for f in FORMATS if f.runtime is not None},
    **{
        f"{f.runtime}{INT8_RUNTIME_SUFFIX}": (f.name, True)
        for f in FORMATS
        if f.runtime is not None and f.int8_writer is not None
    },
}

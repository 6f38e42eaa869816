"""What a format's writer gets and provides: `WriterJob` (the model, where to write, the metadata, the config) and
the `FormatWriter` / `Int8Writer` protocols of the modules the rows of `tphyolo.export.formats` name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from tphyolo.export.calibration import Calibration
    from tphyolo.export.config import ExportConfig
    from tphyolo.infer.backends.metadata import ExportMetadata


@runtime_checkable
class FormatWriter(Protocol):
    """What a format's writer module provides (the exporter loads it by its dotted name)."""

    def check(self, cfg: ExportConfig, device: torch.device) -> None:
        """Refuses what cannot be done here (a missing extra, a device the format needs), before any tracing:
        raises an error with one line naming what is missing."""

    def write(self, job: WriterJob) -> None:
        """Writes the format's file (or folder) at `job.path` from `job`, with `job.metadata` embedded."""


@runtime_checkable
class Int8Writer(FormatWriter, Protocol):
    """What a format's INT8 writer module provides: `write(job)` quantizes on `job.calibration()` and embeds the
    metadata with the `int8_*` fields, and `write(job, layers)` keeps those layers of the model (indices) in float
    too, when the accuracy check asks; the check needs the two below."""

    def write(self, job: WriterJob, layers: tuple[int, ...] = ()) -> None:
        """Writes the INT8 file at `job.path`, the model's `layers` kept in float besides the policy's parts."""

    def write_float(self, job: WriterJob, path: Path) -> Path:
        """Writes the float file that the INT8 file is scored against (same input and runtime) at `path`;
        returns the path the backend loads."""

    def rewrite_metadata(self, path: Path, metadata: ExportMetadata) -> None:
        """Replaces the metadata embedded in the INT8 file at `path` (to add the check's numbers), leaving no
        half-written file behind."""


@dataclass
class WriterJob:
    """What a writer gets: the fused fp32 `model` (and its fp16 copy on CUDA with `--half`, else None), the
    example input it is traced on, where to write, the metadata to embed, the config and the device, and
    `fp32_onnx()`: the fp32 ONNX trace of `model` (traced once, on first call) that converters start from.
    With `--int8`, `calibration()` gives the calibration batches (read once, on first call)."""

    model: torch.nn.Module
    fp16_model: torch.nn.Module | None
    example: torch.Tensor
    path: Path
    metadata: ExportMetadata
    cfg: ExportConfig
    device: torch.device
    fp32_onnx: Callable[[], Path]
    calibration: Callable[[], Calibration] | None = None

    @property
    def fp16_graph(self) -> bool:
        """Whether this file is an fp16 graph (`--half` for a format with `fp16_graph`)."""
        return self.metadata.dtype == "float16"

    def traced(self) -> tuple[torch.nn.Module, torch.Tensor]:
        """The model and example input in the file's dtype: the fp16 copy for an fp16 graph."""
        return (self.fp16_model, self.example.half()) if self.fp16_graph else (self.model, self.example)

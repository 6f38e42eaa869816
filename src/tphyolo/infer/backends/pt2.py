"""torch.export backend for `.pt2` exports (an `ExportedProgram` saved by `torch.export.save`), on the CPU or
CUDA: the successor of TorchScript that PyTorch recommends.

A `.pt2` file is read as a program, not as data: `torch.export.load` (torch 2.14, `torch/export/pt2_archive`)
unpickles the archive's weights and constants with `torch.load(..., weights_only=False)` and `pickle.loads`,
which run whatever code the file names. `load_backend` therefore refuses it, as it refuses TorchScript, unless
the caller trusts it (`--trust-code`).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import torch

from tphyolo.errors import InputError
from tphyolo.infer.backends.base import ExportedBackend, archive_metadata, error_reason
from tphyolo.infer.backends.torchscript import METADATA_FILE  # the archive's extra file holding the metadata

__all__ = ["METADATA_FILE", "ExportedProgramBackend"]


class ExportedProgramBackend(ExportedBackend):
    """An ExportedProgram loaded with `torch.export.load`, moved to `device`; runs under `torch.inference_mode`."""

    format = "pt2"
    suffix = ".pt2"
    runs_code = True

    def __init__(self, path: Path, *, device: torch.device, threads: int | None = None) -> None:
        extra = {METADATA_FILE: ""}
        try:
            program = torch.export.load(str(path), extra_files=extra)
        except (RuntimeError, ValueError, KeyError, zipfile.BadZipFile) as error:
            reason = error_reason(error)
            raise InputError(f"{path}: not a readable torch.export archive (truncated or corrupt?): {reason}") from None
        metadata = archive_metadata(extra[METADATA_FILE], self.format, path, device)
        if device != torch.device("cpu"):
            program = torch.export.passes.move_to_device_pass(program, device)
        self.module = program.module()
        super().__init__(path, metadata, device)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.module(x)

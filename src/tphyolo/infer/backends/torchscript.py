"""TorchScript backend for `.torchscript` exports, on the CPU or CUDA.

A TorchScript file is a program: the code it carries runs when it is loaded and called, whoever wrote it (its
tphyolo metadata can be forged like any other bytes). `load_backend` refuses it unless the caller trusts it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tphyolo.errors import InputError
from tphyolo.infer.backends.base import ExportedBackend, archive_metadata, error_reason
from tphyolo.infer.backends.tracing import quiet_jit

METADATA_FILE = "tphyolo.json"  # the archive's extra file holding the metadata (JSON)


class TorchScriptBackend(ExportedBackend):
    """A traced model loaded with `torch.jit.load` on `device`; runs under `torch.inference_mode`."""

    format = "torchscript"
    suffix = ".torchscript"
    runs_code = True

    def __init__(self, path: Path, *, device: torch.device, threads: int | None = None) -> None:
        extra = {METADATA_FILE: ""}
        try:
            with quiet_jit():
                self.module = torch.jit.load(str(path), map_location=device, _extra_files=extra).eval()
        except RuntimeError as error:
            reason = error_reason(error)
            raise InputError(f"{path}: not a readable TorchScript archive (truncated or corrupt?): {reason}") from error
        super().__init__(path, archive_metadata(extra[METADATA_FILE], self.format, path, device), device)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.module(x)

"""Backends that run exported models, chosen by file: `load_backend("best.onnx").run(images)`.

| path | format | backend |
| --- | --- | --- |
| `*.onnx` | ONNX | `OnnxRuntimeBackend` (CPU, or CUDA with onnxruntime-gpu) |
| `*_openvino_model/` or its `*.xml` | OpenVINO IR | `OpenVINOBackend` (CPU) |
| `*.torchscript` | TorchScript | `TorchScriptBackend` (CPU or CUDA) |
| `*.pt2` | torch.export program | `ExportedProgramBackend` (CPU or CUDA) |

Each is an `ExportedBackend` (`tphyolo.infer.backends.base`) and follows the inference core's `Backend`
interface (`prepare`, `run`, `names`, `stride`, `device`, `dtype`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from tphyolo.errors import InputError
from tphyolo.infer.backends.base import ExportedBackend
from tphyolo.infer.backends.onnxruntime import OnnxRuntimeBackend
from tphyolo.infer.backends.openvino import OpenVINOBackend
from tphyolo.infer.backends.pt2 import ExportedProgramBackend
from tphyolo.infer.backends.torchscript import TorchScriptBackend
from tphyolo.runtime.config import resolve_device
from tphyolo.runtime.flags import TRUST_CODE_FLAG

# format -> the backend that runs its files (the export formats' table, `tphyolo.export.formats`, names these)
BACKENDS: dict[str, type[ExportedBackend]] = {
    backend.format: backend
    for backend in (OnnxRuntimeBackend, OpenVINOBackend, TorchScriptBackend, ExportedProgramBackend)
}


def exported_format(path: str | Path) -> str | None:
    """The export format of `path` judged by its name (an OpenVINO folder by its .xml), or None when it is not
    an exported model (e.g. a .pt checkpoint)."""
    path = Path(path)
    return next((fmt for fmt, backend in BACKENDS.items() if backend.recognises(path)), None)


def load_backend(
    path: str | Path, *, device: str | torch.device = "cpu", threads: int | None = None, trust_code: bool = False
) -> ExportedBackend:
    """The backend for an exported model file or folder, on `device` (a torch.device or a spelling such as
    "cpu", "cuda", "0"), with `threads` CPU threads (default:
    the cores this process may use). FileNotFoundError when it does not exist; ValueError (naming the file)
    when it is not an exported model, is truncated or corrupt, lacks tphyolo metadata, is dynamic but does not run
    at a multiple of its metadata's stride (`ExportedBackend.check_stride`) or cannot run on `device`;
    MissingExtraError when its runtime is not installed. A format whose files are programs (TorchScript, pt2) is refused
    before anything in the file is read unless `trust_code` says the caller trusts it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"exported model {path} does not exist")
    fmt = exported_format(path)
    if fmt is None:
        if path.suffix.lower() == ".engine":
            raise InputError(f"{path}: TensorRT engines are written by `tphyolo export` but not run by tphyolo yet")
        suffixes = sorted(backend.suffix for backend in BACKENDS.values())
        raise InputError(f"{path}: not an exported model; expected a file or folder named *{', *'.join(suffixes)}")
    if BACKENDS[fmt].runs_code and not trust_code:
        raise InputError(
            f"{path}: a {fmt} file is a program that runs its own code when loaded; refused unless you pass "
            f"{TRUST_CODE_FLAG} (only for files you trust: the metadata naming tphyolo as its writer can be forged)"
        )
    if not isinstance(device, torch.device):
        device = resolve_device(device)
    backend = BACKENDS[fmt](path, device=device, threads=threads)
    if not BACKENDS[fmt].runs_code:  # a program runs when it is used, as the user trusted it to, not at load
        backend.check_stride()
    return backend


__all__ = [
    "BACKENDS",
    "ExportedBackend",
    "ExportedProgramBackend",
    "OnnxRuntimeBackend",
    "OpenVINOBackend",
    "TorchScriptBackend",
    "exported_format",
    "load_backend",
]

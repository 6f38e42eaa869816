"""The probes behind `tphyolo.doctor.report()`: each asks the machine one question and returns JSON-ready data."""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import time
from importlib import metadata

import torch

from tphyolo.runtime.compile_cache import compile_cache_dir, describe_cache
from tphyolo.runtime.compiled_cache import describe_entries
from tphyolo.runtime.cpu_isa import cpu_info
from tphyolo.runtime.decisions import decisions_dir, kept_tunings


def driver_version() -> str | None:
    """The NVIDIA driver's version from nvidia-smi, or None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def devices() -> list[dict]:
    """Each visible CUDA device: name, compute capability, memory, and whether this torch build runs on it."""
    arch_list = torch.cuda.get_arch_list() if torch.cuda.is_available() else []
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        arch = f"sm_{props.major}{props.minor}"
        # A binary for the same major version runs on a newer minor; PTX (compute_XY) can be JIT-compiled forward.
        supported = arch in arch_list or any(
            a.startswith("sm_") and int(a[3:]) // 10 == props.major and int(a[3:]) <= props.major * 10 + props.minor
            for a in arch_list
            if a[3:].isdigit()
        )
        found.append(
            {
                "index": index,
                "name": props.name,
                "compute_capability": f"{props.major}.{props.minor}",
                "arch": arch,
                "arch_in_build": supported,
                "memory_gib": round(props.total_memory / 2**30, 2),
                "bf16_supported": props.major >= 8,
            }
        )
    return found


def probe_compile(device: torch.device) -> dict:
    """Compile and run a tiny function on `device` (inductor: C++ on CPU, Triton on CUDA)."""
    backend_name = "inductor (Triton)" if device.type == "cuda" else "inductor (C++)"
    start = time.perf_counter()
    # Inductor logs a warning about CUDA_HOME on CPU-only machines; the probe's result says all there is to say.
    cpp_logger = logging.getLogger("torch.utils.cpp_extension")
    previous_level = cpp_logger.level
    cpp_logger.setLevel(logging.ERROR)
    try:
        torch._dynamo.reset()

        def tiny(x: torch.Tensor) -> torch.Tensor:
            return torch.sin(x) * 2 + x

        x = torch.randn(16, device=device)
        compiled = torch.compile(tiny)
        ok = torch.allclose(compiled(x), tiny(x), atol=1e-5)
        result = {"available": bool(ok), "backend": backend_name, "error": None if ok else "wrong result"}
    except Exception as error:  # any compiler failure is the finding itself
        result = {"available": False, "backend": backend_name, "error": str(error).strip().splitlines()[0][:200]}
    finally:
        torch._dynamo.reset()
        cpp_logger.setLevel(previous_level)
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


def compile_cache() -> dict:
    """Where `--compile` runs keep compiled graphs (`tphyolo.runtime.compile_cache`) and what is there now."""
    folder, source = compile_cache_dir()
    return {**describe_cache(folder), "source": source}


def cpu_isa() -> dict:
    """The CPU's model name, its vector and matrix extensions by name, and whether bf16 runs natively."""
    cpu = cpu_info()
    return {"model": cpu.model, "isa": list(cpu.isa), "native_bf16": cpu.has_native_bf16}


def runtime_probe() -> dict:
    """Where `tphyolo doctor --tune` keeps its decisions (`tphyolo.runtime.decisions`) and each one kept there."""
    folder = decisions_dir()
    return {"dir": str(folder), "choices": kept_tunings(folder)}


def compiled_models() -> dict:
    """The compiled-checkpoint cache (`tphyolo.runtime.compiled_cache`): each entry's size, whether tphyolo made
    it and whether its files still match the SHA-256 its verdict keeps."""
    return describe_entries()


def _installed_bytes(dist: metadata.Distribution) -> int:
    total = 0
    for file in dist.files or ():
        with contextlib.suppress(OSError):
            total += file.locate().stat().st_size
    return total


def torch_install() -> dict:
    """The disk the installed torch takes: its own package, and the CUDA libraries of a CUDA build (the
    nvidia-* and triton packages), in bytes."""
    torch_bytes = cuda_bytes = 0
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name == "torch":
            torch_bytes += _installed_bytes(dist)
        elif name.startswith("nvidia-") or name == "triton":
            cuda_bytes += _installed_bytes(dist)
    return {"torch_bytes": torch_bytes, "cuda_libraries_bytes": cuda_bytes}


def pinned_memory() -> dict:
    """Whether page-locked host memory can be allocated (what `pin_memory` loaders need)."""
    if not torch.cuda.is_available():
        return {"supported": False, "reason": "no CUDA device (pinned memory only helps host-to-GPU copies)"}
    try:
        torch.empty(1024).pin_memory()
        return {"supported": True, "reason": None}
    except RuntimeError as error:
        return {"supported": False, "reason": str(error).splitlines()[0]}

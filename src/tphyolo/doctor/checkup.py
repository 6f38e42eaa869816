"""`report()`: every probe of the doctor run once, gathered into one value, `DoctorReport`, with its problems."""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tphyolo._version import __version__
from tphyolo.doctor import probes
from tphyolo.doctor.problems import Problem, find_problems
from tphyolo.doctor.text import format_report
from tphyolo.runtime import cpu_memory
from tphyolo.runtime.flags import ALLOC_ENV_VARS, DEFAULT_ALLOC_CONF
from tphyolo.runtime.install import torchvision_status
from tphyolo.runtime.sdpa_probe import probe_sdpa


@dataclass(frozen=True)
class DoctorReport:
    """What this environment can run. Each section is JSON-ready data (`to_dict()` is `tphyolo doctor --json`);
    `problems` are what will fail or run slowly, each with its fix; `text()` is the human-readable report."""

    tphyolo: str  # the package version
    python: dict[str, Any]  # version, executable
    platform: str
    torch: dict[str, Any]  # version, torchvision, debug, pair_problem (a torch/torchvision mismatch, or None)
    cuda: dict[str, Any]  # built_with, available, driver, cudnn, arch_list, device_count
    devices: tuple[dict[str, Any], ...]  # per GPU: name, arch, arch_in_build, memory_gib, bf16_supported
    sdpa: dict[str, Any]  # enabled backends; per probe case, the kernel that ran and those usable alone
    precision: dict[str, Any]  # fp32 matmul precision, cuDNN TF32 and benchmark
    allocator: dict[str, Any]  # CUDA allocator settings in force; the CPU malloc policy
    compile: dict[str, Any]  # the torch.compile probe: available, backend, error, seconds; or skipped
    compile_cache: dict[str, Any]  # dir, source, exists, files, mb
    cpu: dict[str, Any]  # cores, usable cores, torch threads, model, isa (AVX2 ... AMX-INT8), native_bf16
    runtime_probe: dict[str, Any]  # dir, choices (the runtime probe's kept choices, with their keys and times)
    pinned_memory: dict[str, Any]  # supported, reason
    install: dict[str, Any]  # torch_bytes, cuda_libraries_bytes
    problems: tuple[Problem, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (problems as {"message", "fix"})."""
        return dataclasses.asdict(self)

    def text(self) -> str:
        """The human-readable report, as `tphyolo doctor` prints it."""
        return format_report(self)


def report(*, compile_check: bool | None = None, progress: Callable[[str], None] | None = None) -> DoctorReport:
    """Probe this environment and return what was found, problems included.

    compile_check: compile a tiny function with torch.compile; None = only when a CUDA device is visible (on a
    CPU the C++ build alone takes tens of seconds). progress: called with a line before each slow probe.
    """
    say = progress or (lambda line: None)
    cuda_available = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda_available else torch.device("cpu")
    if compile_check is None:
        compile_check = cuda_available
    torchvision_version, torchvision_problem = torchvision_status()
    probe_dtype = torch.bfloat16 if cuda_available and torch.cuda.is_bf16_supported() else torch.float32
    say(f"probing attention kernels on {device} ...")
    sdpa_probes = probe_sdpa(device, probe_dtype)
    compile_probe: dict[str, Any] = {"available": None, "skipped": True}
    if compile_check:
        say(f"compiling a tiny function with torch.compile on {device} (tens of seconds on a CPU) ...")
        compile_probe = probes.probe_compile(device)
    found = DoctorReport(
        tphyolo=__version__,
        python={"version": platform.python_version(), "executable": sys.executable},
        platform=platform.platform(),
        torch={
            "version": torch.__version__,
            "torchvision": torchvision_version,
            "debug": torch.version.debug,
            "pair_problem": torchvision_problem,
        },
        cuda={
            "built_with": torch.version.cuda,
            "available": cuda_available,
            "driver": probes.driver_version(),
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "arch_list": torch.cuda.get_arch_list() if cuda_available else [],
            "device_count": torch.cuda.device_count() if cuda_available else 0,
        },
        devices=tuple(probes.devices()) if cuda_available else (),
        sdpa={
            "enabled": {
                "flash": torch.backends.cuda.flash_sdp_enabled(),
                "efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                "math": torch.backends.cuda.math_sdp_enabled(),
            },
            "probe_device": str(device),
            "probe_dtype": str(probe_dtype).replace("torch.", ""),
            "probes": sdpa_probes,
        },
        precision={
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
        },
        allocator={
            "env": {name: os.environ.get(name) for name in ALLOC_ENV_VARS},
            "in_force": next((os.environ[n] for n in ALLOC_ENV_VARS if os.environ.get(n)), None),
            "tphyolo_default": DEFAULT_ALLOC_CONF,
            "cpu_malloc": {
                "glibc": cpu_memory.glibc_mallopt() is not None,
                "user_choice": cpu_memory.user_malloc_choice(),
                "keep_bytes": cpu_memory.KEEP_BYTES,
            },
        },
        compile=compile_probe,
        compile_cache=probes.compile_cache(),
        cpu={
            "logical_cores": os.cpu_count(),
            "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "torch_interop_threads": torch.get_num_interop_threads(),
            "processor": platform.processor() or platform.machine(),
            **probes.cpu_isa(),
        },
        runtime_probe=probes.runtime_probe(),
        pinned_memory=probes.pinned_memory(),
        install=probes.torch_install(),
    )
    return dataclasses.replace(found, problems=tuple(find_problems(found)))

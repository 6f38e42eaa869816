"""`report()`: every probe of the doctor run once, gathered into one value, `DoctorReport`, with its problems."""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

import torch

from tphyolo._version import __version__
from tphyolo.cores import available_cores
from tphyolo.doctor import probes
from tphyolo.doctor.findings import DoctorReport
from tphyolo.doctor.problems import find_problems
from tphyolo.runtime import cpu_memory
from tphyolo.runtime.flags import ALLOC_ENV_VARS, DEFAULT_ALLOC_CONF
from tphyolo.runtime.install import torchvision_status
from tphyolo.runtime.sdpa_probe import probe_sdpa


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
            "usable_cores": available_cores(),
            "torch_threads": torch.get_num_threads(),
            "torch_interop_threads": torch.get_num_interop_threads(),
            "processor": platform.processor() or platform.machine(),
            **probes.cpu_isa(),
        },
        runtime_probe=probes.runtime_probe(),
        compiled_models=probes.compiled_models(),
        pinned_memory=probes.pinned_memory(),
        install=probes.torch_install(),
    )
    return dataclasses.replace(found, problems=tuple(find_problems(found)))

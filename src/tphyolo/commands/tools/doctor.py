"""`tphyolo doctor`: what this environment can run, probed rather than guessed, with a fix for each problem.

A CPU-only machine is a fact of the report ("device: CPU only"), not a problem. The torch.compile probe takes
tens of seconds on a CPU (a C++ build of a tiny function), so it runs by default only where a GPU is visible, and
on request (`--compile-check`) elsewhere; each slow probe announces itself on stderr before it starts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from tphyolo._version import __version__
from tphyolo.runtime import cpu_memory
from tphyolo.runtime.flags import ALLOC_ENV_VARS, DEFAULT_ALLOC_CONF

if TYPE_CHECKING:  # torch is imported when the command runs, not when `tphyolo doctor -h` parses
    import torch

MIN_TORCH = (2, 4)


@dataclass(frozen=True)
class Problem:
    """Something that will fail or run slowly, and the one-line fix."""

    message: str
    fix: str


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _driver_version() -> str | None:
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


def _devices() -> list[dict]:
    import torch

    arch_list = torch.cuda.get_arch_list() if torch.cuda.is_available() else []
    devices = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        arch = f"sm_{props.major}{props.minor}"
        # A binary for the same major version runs on a newer minor; PTX (compute_XY) can be JIT-compiled forward.
        supported = arch in arch_list or any(
            a.startswith("sm_") and int(a[3:]) // 10 == props.major and int(a[3:]) <= props.major * 10 + props.minor
            for a in arch_list
            if a[3:].isdigit()
        )
        devices.append(
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
    return devices


def _probe_compile(device: torch.device) -> dict:
    """Compile and run a tiny function on `device` (inductor: C++ on CPU, Triton on CUDA)."""
    import torch

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


def _compile_cache() -> dict:
    """Where `--compile` runs keep compiled graphs (`tphyolo.runtime.compile_cache`) and what is there now."""
    from tphyolo.runtime.compile_cache import compile_cache_dir, describe_cache

    folder, source = compile_cache_dir()
    return {**describe_cache(folder), "source": source}


CPU_WHEEL_INDEX = "https://download.pytorch.org/whl/cpu"  # PyTorch's index of CPU-only builds


def _installed_bytes(dist) -> int:
    total = 0
    for file in dist.files or ():
        with contextlib.suppress(OSError):
            total += file.locate().stat().st_size
    return total


def _torch_install() -> dict:
    """The disk the installed torch takes: its own package, and the CUDA libraries of a CUDA build (the
    nvidia-* and triton packages), in bytes."""
    from importlib import metadata

    torch_bytes = cuda_bytes = 0
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name == "torch":
            torch_bytes += _installed_bytes(dist)
        elif name.startswith("nvidia-") or name == "triton":
            cuda_bytes += _installed_bytes(dist)
    return {"torch_bytes": torch_bytes, "cuda_libraries_bytes": cuda_bytes}


def _pinned_memory() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"supported": False, "reason": "no CUDA device (pinned memory only helps host-to-GPU copies)"}
    try:
        torch.empty(1024).pin_memory()
        return {"supported": True, "reason": None}
    except RuntimeError as error:
        return {"supported": False, "reason": str(error).splitlines()[0]}


def collect_report(*, compile_check: bool | None = None, progress=None) -> dict:
    """Everything doctor knows, as JSON-ready data (see `tphyolo doctor --json`).

    compile_check: compile a tiny function with torch.compile; None = only when a CUDA device is visible (on a
    CPU the C++ build alone takes tens of seconds). progress: called with a line before each slow probe.
    """
    import torch

    from tphyolo.runtime.sdpa_probe import probe_sdpa

    say = progress or (lambda line: None)

    cuda_available = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda_available else torch.device("cpu")
    if compile_check is None:
        compile_check = cuda_available
    from tphyolo.runtime.install import torchvision_status

    torchvision_version, torchvision_problem = torchvision_status()
    cudnn_version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    probe_dtype = torch.bfloat16 if cuda_available and torch.cuda.is_bf16_supported() else torch.float32
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    say(f"probing attention kernels on {device} ...")
    sdpa_probes = probe_sdpa(device, probe_dtype)
    compile_probe = {"available": None, "skipped": True}
    if compile_check:
        say(f"compiling a tiny function with torch.compile on {device} (tens of seconds on a CPU) ...")
        compile_probe = _probe_compile(device)

    report = {
        "tphyolo": __version__,
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "platform": platform.platform(),
        "torch": {
            "version": torch.__version__,
            "torchvision": torchvision_version,
            "debug": torch.version.debug,
            "pair_problem": torchvision_problem,
        },
        "cuda": {
            "built_with": torch.version.cuda,
            "available": cuda_available,
            "driver": _driver_version(),
            "cudnn": cudnn_version,
            "arch_list": torch.cuda.get_arch_list() if cuda_available else [],
            "device_count": torch.cuda.device_count() if cuda_available else 0,
        },
        "devices": _devices() if cuda_available else [],
        "sdpa": {
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
        "precision": {
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
        },
        "allocator": {
            "env": {name: os.environ.get(name) for name in ALLOC_ENV_VARS},
            "in_force": next((os.environ[n] for n in ALLOC_ENV_VARS if os.environ.get(n)), None),
            "tphyolo_default": DEFAULT_ALLOC_CONF,
            "cpu_malloc": {
                "glibc": cpu_memory.glibc_mallopt() is not None,
                "user_choice": cpu_memory.user_malloc_choice(),
                "keep_bytes": cpu_memory.KEEP_BYTES,
            },
        },
        "compile": compile_probe,
        "compile_cache": _compile_cache(),
        "cpu": {
            "logical_cores": os.cpu_count(),
            "usable_cores": affinity,
            "torch_threads": torch.get_num_threads(),
            "torch_interop_threads": torch.get_num_interop_threads(),
            "processor": platform.processor() or platform.machine(),
        },
        "pinned_memory": _pinned_memory(),
        "install": _torch_install(),
    }
    report["problems"] = [asdict(p) for p in find_problems(report)]
    return report


def find_problems(report: dict) -> list[Problem]:
    """The problems in `report`, each with a one-line fix."""
    problems: list[Problem] = []
    if _version_tuple(report["torch"]["version"]) < MIN_TORCH:
        problems.append(Problem(f"torch {report['torch']['version']} is too old", "pip install -U 'torch>=2.4'"))
    pair = report["torch"].get("pair_problem")
    if report["torch"]["torchvision"] is None:
        problems.append(Problem("torchvision is not installed", "pip install torchvision (matching your torch)"))
    elif pair is not None:
        problems.append(Problem(pair["message"], pair["fix"]))
    cuda = report["cuda"]
    for dev in report["devices"]:
        if not dev["arch_in_build"]:
            problems.append(
                Problem(
                    f"GPU {dev['index']} ({dev['name']}, {dev['arch']}) is not in this torch build's arch list",
                    f"install a torch build compiled for {dev['arch']} (see pytorch.org for the right CUDA wheel)",
                )
            )
        if dev["bf16_supported"] and not report["precision"]["cudnn_allow_tf32"]:
            problems.append(
                Problem("TF32 convolutions are disabled on an Ampere-or-newer GPU", "drop --no-tf32 for speed")
            )
    for case, row in report["sdpa"]["probes"].items():
        if str(row.get("default", "")).startswith("error"):
            problems.append(
                Problem(
                    f"scaled_dot_product_attention fails for the {case} call: {row['default']}",
                    "upgrade torch, or allow the math backend (--sdpa-backend math)",
                )
            )
        elif cuda["available"] and row.get("default") == "math":
            problems.append(
                Problem(
                    f"the {case} attention call falls back to the math kernel on the GPU",
                    "use --amp bf16/fp16 and a GPU with flash/efficient attention support for fused kernels",
                )
            )
    compile_info = report["compile"]
    if compile_info.get("available") is False:
        fix = (
            "install Triton matching your torch (pip install triton)"
            if cuda["available"]
            else "install a C++ compiler (e.g. apt-get install g++) for inductor's CPU path"
        )
        problems.append(Problem(f"torch.compile does not work: {compile_info.get('error')}", fix))
    cpu = report["cpu"]
    if cpu["torch_threads"] > (cpu["usable_cores"] or cpu["torch_threads"]):
        problems.append(
            Problem(
                f"torch uses {cpu['torch_threads']} threads on {cpu['usable_cores']} usable cores",
                f"set OMP_NUM_THREADS={cpu['usable_cores']} to avoid oversubscription",
            )
        )
    install = report.get("install") or {}
    if cuda["built_with"] and not cuda["available"]:  # a CUDA wheel, whether its libraries are packages or inside
        gigabytes = (install.get("torch_bytes", 0) + install.get("cuda_libraries_bytes", 0)) / 1e9
        libraries = install.get("cuda_libraries_bytes", 0) / 1e9
        held = f", {libraries:.1f} GB of it CUDA libraries (nvidia-*, triton)" if libraries else ""
        problems.append(
            Problem(
                f"torch {report['torch']['version']} is a CUDA build (CUDA {cuda['built_with']}) and no GPU is "
                f"visible: it takes {gigabytes:.1f} GB here{held}, downloaded for a GPU that is not there",
                "on a machine without a GPU, the CPU build is enough: pip install --force-reinstall torch "
                f"torchvision --index-url {CPU_WHEEL_INDEX}, then pip uninstall triton and the nvidia-* packages",
            )
        )
    if cuda["available"] and not report["pinned_memory"]["supported"]:
        problems.append(
            Problem("pinned host memory is unavailable", "raise the locked-memory limit (ulimit -l) or use --workers 0")
        )
    return problems


def device_summary(report: dict) -> str:
    """What the report's machine computes on, in words: the GPUs, or "CPU only" and why."""
    cuda = report["cuda"]
    if cuda["available"]:
        names = ", ".join(f"{d['index']}: {d['name']}" for d in report["devices"])
        return f"{cuda['device_count']} CUDA GPU(s) ({names})"
    if cuda["built_with"] is None:
        return "CPU only (this torch build has no CUDA; a CUDA build of torch is needed to use a GPU)"
    return "CPU only (no GPU visible: nvidia-smi, the driver and CUDA_VISIBLE_DEVICES decide)"


def format_report(report: dict) -> str:
    """The human-readable report."""
    lines = [f"tphyolo {report['tphyolo']}  ({report['platform']})"]
    lines.append(f"  python        {report['python']['version']}  {report['python']['executable']}")
    lines.append(f"  torch         {report['torch']['version']}   torchvision {report['torch']['torchvision']}")
    cuda = report["cuda"]
    lines.append(f"  device        {device_summary(report)}")
    lines.append(
        f"  cuda          built with {cuda['built_with']}, available: {cuda['available']}, "
        f"driver: {cuda['driver']}, cuDNN: {cuda['cudnn']}"
    )
    if cuda["available"]:
        lines.append(f"  arch list     {' '.join(cuda['arch_list'])}")
    for dev in report["devices"]:
        lines.append(
            f"  gpu {dev['index']}         {dev['name']}  cc {dev['compute_capability']}  "
            f"{dev['memory_gib']} GiB  arch in build: {dev['arch_in_build']}"
        )
    sdpa = report["sdpa"]
    enabled = ", ".join(name for name, on in sdpa["enabled"].items() if on)
    lines.append(f"  sdpa enabled  {enabled}")
    for case, row in sdpa["probes"].items():
        ran = row["default"]
        usable = ", ".join(name for name in ("flash", "efficient", "cudnn", "math") if row.get(name) == "ok")
        lines.append(
            f"  sdpa {case:<8} ran: {ran}   usable alone: {usable or 'none'}"
            f"   ({sdpa['probe_device']}, {sdpa['probe_dtype']})"
        )
    prec = report["precision"]
    lines.append(
        f"  precision     fp32 matmul: {prec['float32_matmul_precision']}, cudnn tf32: {prec['cudnn_allow_tf32']}, "
        f"cudnn.benchmark: {prec['cudnn_benchmark']}"
    )
    alloc = report["allocator"]
    lines.append(
        f"  allocator     in force: {alloc['in_force'] or '(torch default)'}; "
        f"tphyolo applies {alloc['tphyolo_default']} when unset"
    )
    malloc = alloc["cpu_malloc"]
    if malloc["user_choice"]:
        lines.append(f"  cpu malloc    left to your setting {malloc['user_choice']}")
    elif malloc["glibc"]:
        lines.append(
            f"  cpu malloc    glibc; commands that run models keep freed blocks up to {malloc['keep_bytes'] >> 20} MiB "
            "for reuse (--no-keep-cpu-memory: off)"
        )
    else:
        lines.append("  cpu malloc    not glibc: left as it is")
    comp = report["compile"]
    if comp.get("skipped"):
        lines.append("  compile       not checked (tphyolo doctor --compile-check probes it: tens of seconds on a CPU)")
    else:
        state = "works" if comp["available"] else f"FAILS: {comp['error']}"
        lines.append(f"  compile       {comp['backend']}: {state} ({comp['seconds']} s for a tiny function)")
    cache = report["compile_cache"]
    held = f"{cache['files']} files, {cache['mb']} MB" if cache["exists"] else "empty (not created yet)"
    lines.append(f"  compile cache {cache['dir']} ({cache['source']}): {held}; used by --compile runs")
    cpu = report["cpu"]
    lines.append(
        f"  cpu           {cpu['processor']}, {cpu['usable_cores']}/{cpu['logical_cores']} cores usable, "
        f"torch threads {cpu['torch_threads']} (interop {cpu['torch_interop_threads']})"
    )
    pinned = report["pinned_memory"]
    lines.append(f"  pinned memory {'supported' if pinned['supported'] else 'no: ' + pinned['reason']}")
    if report["problems"]:
        lines.append("problems:")
        lines.extend(f"  - {p['message']}\n    fix: {p['fix']}" for p in report["problems"])
    else:
        lines.append("no problems found")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--compile-check",
        dest="compile_check",
        action="store_true",
        default=None,
        help="compile a tiny function with torch.compile (default: only where a GPU is visible; ~30 s on a CPU)",
    )
    group.add_argument(
        "--no-compile-check", dest="compile_check", action="store_false", help="skip the torch.compile probe"
    )


def run(args: argparse.Namespace) -> int:
    """Exit code 0, or 1 when torch and torchvision do not go together (every other command fails then): the
    report is printed whole and the pair's problem is also one line on stderr."""

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    report = collect_report(compile_check=args.compile_check, progress=progress)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    pair = report["torch"]["pair_problem"]
    if pair is not None:
        from tphyolo.runtime.install import PairProblem

        print(f"tphyolo doctor: error: {PairProblem(**pair)}", file=sys.stderr)
        return 1
    return 0

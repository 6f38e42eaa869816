"""Runtime settings: device, precision, attention kernels, compilation, memory layout, allocators.

`RuntimeConfig` is plain data. Nothing here changes global state on import. `configure_process(cfg)` is the
one function that applies process-wide settings (CUDA allocator environment, CPU malloc thresholds, TF32,
cudnn.benchmark); only the command-line entry points call it, before the first CUDA call. Everything else is
scoped: `autocast(cfg, device)`, `sdpa_context(cfg)` and `strict_fp32()` (for comparisons) are context managers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from tphyolo.errors import InputError
from tphyolo.flags import from_flags
from tphyolo.runtime.compile_cache import use_compile_cache
from tphyolo.runtime.cpu_memory import keep_freed_blocks
from tphyolo.runtime.flags import ALLOC_ENV_VARS, SDPA_BACKEND_NAMES, RuntimeSettings, parse_device

QUIET_KINETO_LOG_LEVEL = "6"  # above kineto's ERROR level: torch.profiler's C++ library prints nothing


@dataclass(frozen=True)
class RuntimeConfig(RuntimeSettings):
    """How a process runs its models: the settings of `RuntimeSettings` (each also a flag), with the methods
    that decide the device, autocast dtype, memory format and compilation from them."""

    def torch_device(self, local_rank: int = 0) -> torch.device:
        """The device this process computes on (for a multi-GPU spec, the `local_rank`-th one)."""
        return resolve_device(self.device, local_rank=local_rank)

    def process_device(self) -> torch.device:
        """The device this process computes on: under torchrun the `LOCAL_RANK`-th of the devices named, else
        the first."""
        from tphyolo.runtime.distributed import DistContext

        return self.torch_device(DistContext.from_env().local_rank)

    def amp_dtype(self, device: torch.device) -> torch.dtype | None:
        """The autocast dtype on `device`, or None for full precision (and for fp16 weights, `half`)."""
        if self.amp == "off" or self.half:
            return None
        if self.amp == "bf16":
            return torch.bfloat16
        if self.amp == "fp16":
            return torch.float16
        if device.type != "cuda":
            return None  # auto: CPU autocast rarely pays off
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16

    def needs_grad_scaler(self, device: torch.device) -> bool:
        """fp16 training needs loss scaling; bf16 and fp32 do not."""
        return self.amp_dtype(device) == torch.float16

    def check_device(self, device: torch.device) -> None:
        """Raise ValueError when this runtime cannot run on `device` (fp16 weights need CUDA)."""
        if self.half and device.type != "cuda":
            raise InputError(f"half precision (fp16 weights) needs a CUDA device, got {device}")

    def memory_format(self, device: torch.device, *, training: bool = False) -> torch.memory_format:
        """The layout of 4-D weights and inputs on `device` for inference or `training`: NHWC
        (`torch.channels_last`) or NCHW (`torch.contiguous_format`), as `channels_last` says."""
        nhwc = self.channels_last
        if nhwc is None:
            nhwc = device.type == "cpu" and not training
        return torch.channels_last if nhwc else torch.contiguous_format

    def place_model(self, model: nn.Module, device: torch.device, *, training: bool = False) -> nn.Module:
        """`model` on `device` in this runtime's weights dtype (fp16 when `half`) and memory format
        (`memory_format`, for inference or `training`); the one place that decides them. Modifies and returns
        `model`."""
        self.check_device(device)
        model = model.to(device)
        if self.half:
            model = model.half()
        return model.to(memory_format=self.memory_format(device, training=training))

    def compile_model(self, model: nn.Module) -> nn.Module:
        """`torch.compile(model)` with this runtime's mode (compiled on the first call of each input shape), or
        `model` itself when compile is off."""
        return model if self.compile == "off" else torch.compile(model, mode=self.compile)

    def prepare_model(self, model: nn.Module, device: torch.device) -> nn.Module:
        """`place_model`, then `compile_model`: what inference (val, predict, bench, profile) runs."""
        return self.compile_model(self.place_model(model, device))

    def prepare_images(self, images: torch.Tensor, device: torch.device, *, training: bool = False) -> torch.Tensor:
        """(B, 3, H, W) uint8 images (0..255) -> the model's input on `device` for inference or `training`:
        floats in [0, 1], fp16 when `half` else fp32, in `memory_format`."""
        x = images.to(device, non_blocking=True)
        x = x.to(torch.float16 if self.half else torch.float32) / 255.0
        return x.contiguous(memory_format=self.memory_format(device, training=training))


def resolve_device(spec: str, *, local_rank: int = 0) -> torch.device:
    """The torch.device for `spec` in this process; raises ValueError if it asks for a GPU that is absent."""
    names = parse_device(spec)
    if names == ["auto"]:
        return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    if names == ["cpu"]:
        return torch.device("cpu")
    if names == ["mps"]:
        if not torch.backends.mps.is_built():
            raise InputError(f"--device {spec}: this PyTorch build has no MPS support (try --device cpu)")
        if not torch.backends.mps.is_available():
            raise InputError(f"--device {spec}: no MPS device is available on this machine (try --device cpu)")
        return torch.device("mps")
    if not torch.cuda.is_available():
        raise InputError(f"--device {spec}: asks for CUDA, but no CUDA device is available (try --device cpu)")
    if names == ["cuda"]:
        return torch.device("cuda", local_rank)
    if max(torch.device(name).index for name in names) >= torch.cuda.device_count():
        raise InputError(f"--device {spec}: only {torch.cuda.device_count()} CUDA device(s) visible")
    return torch.device(names[min(local_rank, len(names) - 1)])


def configure_process(cfg: RuntimeConfig) -> dict[str, str]:
    """Apply process-wide settings from `cfg`; call once, from an entry point, before CUDA is initialised.

    Sets PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF to `cfg.alloc_conf` only if the user set neither (a
    user's setting always wins), KINETO_LOG_LEVEL to silence the profiler library's own lines (profiler
    start/stop, "gpuGetDeviceCount failed" on machines without a GPU) unless the user set it, keeps large freed
    CPU blocks for reuse when `cfg.keep_cpu_memory` (`tphyolo.runtime.cpu_memory.keep_freed_blocks`), then the TF32
    and cudnn.benchmark flags (no autotuning, and deterministic algorithms, under `cfg.deterministic`); when
    compiling, points PyTorch's compile caches at tphyolo's
    (`tphyolo.runtime.compile_cache`). Raises RuntimeError if CUDA is already initialised, because the allocator reads
    its settings once, at initialisation.
    Returns what it did, for logging: {"alloc_conf": ..., "alloc_conf_source": "user"|"tphyolo"|"none",
    "cpu_memory": "tphyolo"|"user"|"unavailable"|"off"}, and when compiling {"compile_cache": DIR,
    "compile_cache_source": "user"|"tphyolo"|"default"}.
    """
    if torch.cuda.is_initialized():
        raise RuntimeError(
            "configure_process() must run before CUDA is initialised: the allocator settings would be ignored"
        )
    user_value = next((os.environ[name] for name in ALLOC_ENV_VARS if os.environ.get(name)), None)
    if user_value is not None:
        report = {"alloc_conf": user_value, "alloc_conf_source": "user"}
    elif cfg.alloc_conf:
        for name in ALLOC_ENV_VARS:
            os.environ[name] = cfg.alloc_conf
        report = {"alloc_conf": cfg.alloc_conf, "alloc_conf_source": "tphyolo"}
    else:
        report = {"alloc_conf": "", "alloc_conf_source": "none"}
    os.environ.setdefault("KINETO_LOG_LEVEL", QUIET_KINETO_LOG_LEVEL)
    report["cpu_memory"] = keep_freed_blocks() if cfg.keep_cpu_memory else "off"
    torch.set_float32_matmul_precision("high" if cfg.tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = cfg.tf32
    torch.backends.cudnn.benchmark = cfg.cudnn_benchmark and not cfg.deterministic
    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # what deterministic cuBLAS needs
        torch.use_deterministic_algorithms(True, warn_only=True)
        report["deterministic"] = "on"
    if cfg.compile != "off":
        cache = use_compile_cache()
        report.update(compile_cache=cache["dir"], compile_cache_source=cache["source"])
    return report


@contextlib.contextmanager
def strict_fp32() -> Iterator[None]:
    """Within: fp32 matmuls and convolutions without TensorFloat-32, so that two computations of one function (a
    model and its export, a block and its original-computation twin) compare to fp32 tolerances; the previous
    settings are restored on exit."""
    precision = torch.get_float32_matmul_precision()
    cudnn_tf32 = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.allow_tf32 = cudnn_tf32


@contextlib.contextmanager
def autocast(cfg: RuntimeConfig, device: torch.device) -> Iterator[None]:
    """Autocast to `cfg.amp_dtype(device)` on `device`; a no-op when AMP is off."""
    dtype = cfg.amp_dtype(device)
    with torch.autocast(device_type=device.type, dtype=dtype, enabled=dtype is not None):
        yield


def sdpa_backends(names: tuple[str, ...] | list[str]) -> list:
    """`torch.nn.attention.SDPBackend` members for backend names (all of them for an empty list)."""
    from torch.nn.attention import SDPBackend

    members = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }
    return [members[name] for name in (names or SDPA_BACKEND_NAMES)]


@contextlib.contextmanager
def sdpa_context(cfg: RuntimeConfig) -> Iterator[None]:
    """Restrict `F.scaled_dot_product_attention` to `cfg.sdpa_backends` (no restriction when empty)."""
    if not cfg.sdpa_backends:
        yield
        return
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(sdpa_backends(cfg.sdpa_backends)):
        yield


def runtime_from_args(args: argparse.Namespace) -> RuntimeConfig:
    """A RuntimeConfig from the flags added by `add_runtime_arguments`. Raises ValueError for `--amp X` given
    with `--no-amp`."""
    return from_flags(RuntimeConfig, args)

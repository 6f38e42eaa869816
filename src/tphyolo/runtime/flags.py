"""The runtime settings and their command-line flags, without importing torch.

`RuntimeSettings` declares each setting once: its default, choices, help and flag (`tphyolo.flags`);
`add_runtime_arguments` derives the "runtime" group of a parser from it. `tphyolo -h`, `tphyolo COMMAND -h` and
argument errors build their parsers from this module, so they answer in a fraction of a second;
`tphyolo.runtime.config.RuntimeConfig` is the same data with the methods that apply it (and import torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from tphyolo.errors import InputError
from tphyolo.flags import add_flags, check_field_types, flag
from tphyolo.runtime.cpu_memory import KEEP_BYTES

AMP_CHOICES = ("auto", "bf16", "fp16", "off")
COMPILE_CHOICES = ("off", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
SDPA_BACKEND_NAMES = ("flash", "efficient", "cudnn", "math")
ALLOC_ENV_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
DEFAULT_ALLOC_CONF = "expandable_segments:True"


def parse_device(spec: str) -> list[str]:
    """Split a device spec into torch device strings without touching CUDA; raises ValueError if malformed."""
    spec = spec.strip().lower()
    if spec in ("auto", "cpu", "cuda", "mps"):
        return [spec]
    if spec.startswith("cuda:") and spec[5:].isdigit():
        return [spec]
    parts = [p.strip() for p in spec.split(",")]
    if parts and all(p.isdigit() for p in parts):
        if len(set(parts)) != len(parts):
            raise InputError(f"device {spec!r} names a GPU twice")
        return [f"cuda:{p}" for p in parts]
    raise InputError(f"bad device {spec!r}: use auto, cpu, cuda, cuda:N, N or N,M,...")


TRUST_CODE_FLAG = "--trust-code"  # allows loading weights that run their own code (TorchScript)
INFERENCE_ONLY = ("half", "trust_code")  # settings of commands that only run models forward


@dataclass(frozen=True)
class RuntimeSettings:
    """How a process runs its models; each field is also a flag of the "runtime" group.

    device: "auto" (first CUDA device, else CPU), "cpu", "cuda", "cuda:N", "N", or "N,M,..." (several GPUs:
        each process of a distributed run uses its LOCAL_RANK).
    amp: autocast dtype: "auto" (decided once by `tphyolo.runtime.decisions`: bf16 on GPUs that support it,
        fp16 on older GPUs; on the CPU fp32, or bf16 for training where the CPU has native bf16, unless
        `tphyolo doctor --tune` kept another choice), "bf16", "fp16" or "off".
    compile: torch.compile mode, or "off".
    channels_last: the memory format of convolution weights and inputs: True NHWC (`torch.channels_last`),
        False NCHW, None (auto) decided once by `tphyolo.runtime.decisions` (a rule by device and CPU, or what
        `tphyolo doctor --tune` kept); without a decision, NHWC for inference on the CPU and NCHW for training
        and on GPUs (`RuntimeConfig.memory_format`). On the CPU,
        oneDNN runs NHWC convolutions without reordering each activation: an inference pass measured 1.07-2.1x
        faster (`benchmarks/memory_format.py`: the Swin and ++ variants to tph-yolov5n at 1536 px), a training
        step 0.95-1.10x (the Swin variant is slower).
    half: inference with fp16 weights and inputs, without autocast (CUDA only; refused with an explicit
        --amp bf16/fp16, which would mean the opposite).
    trust_code: load model files that are programs (TorchScript runs the code it carries); off, they are
        refused before anything in them is read.
    sdpa_backends: the scaled-dot-product-attention kernels allowed, from SDPA_BACKEND_NAMES; empty = all.
    tf32: allow TensorFloat-32 in fp32 matmuls and convolutions on Ampere and newer GPUs.
    cudnn_benchmark: let cuDNN pick the fastest convolution algorithm per input shape.
    alloc_conf: CUDA caching-allocator settings, applied only when the user's environment sets none.
    deterministic: the exact path: fp32, NCHW, PyTorch for checkpoints (no compiled runtime), deterministic
        algorithms and no autotuning; what the parity tests use.
    keep_cpu_memory: keep large freed CPU blocks in the process for reuse (glibc malloc thresholds, see
        `tphyolo.runtime.cpu_memory`) instead of page-faulting them in again on every pass.
    """

    device: str = flag("auto", "--device", help="auto, cpu, cuda, N or N,M,...")
    amp: str = flag(
        "auto", "--amp", const="auto", choices=AMP_CHOICES, negative=("--no-amp", "off"),
        help="autocast dtype; auto = bf16 on GPUs that support it, fp16 on older GPUs; on the CPU fp32, or bf16 for "
        "training on CPUs with native bf16 (tphyolo doctor --tune may keep another choice)",
    )  # fmt: skip
    compile: str = flag(
        "off", "--compile", const="default", choices=COMPILE_CHOICES,
        help="torch.compile mode; bare --compile means 'default'",
    )  # fmt: skip
    channels_last: bool | None = flag(
        None, "--channels-last",
        help="NHWC memory format for convolutions (default: decided by a rule per device and CPU, or what "
        "tphyolo doctor --tune kept)",
    )  # fmt: skip
    half: bool = flag(False, "--half", help="fp16 weights and inputs, no autocast (CUDA only)")
    trust_code: bool = flag(
        False, TRUST_CODE_FLAG,
        help="load weights that are programs (.torchscript runs the code it carries, .pt2 unpickles); only for files "
        "you trust",
    )  # fmt: skip
    sdpa_backends: tuple[str, ...] = flag(
        (), "--sdpa-backend", append=True, choices=SDPA_BACKEND_NAMES,
        help="allow only this attention kernel; repeat to allow several (default: all)",
    )  # fmt: skip
    tf32: bool = flag(True, "--no-tf32", help="disable TensorFloat-32 matmuls/convolutions")
    cudnn_benchmark: bool = flag(
        True, "--no-cudnn-benchmark", help="disable cuDNN autotuning of convolution algorithms"
    )
    alloc_conf: str = flag(
        DEFAULT_ALLOC_CONF, "--alloc-conf", help="CUDA allocator settings used when PYTORCH_CUDA_ALLOC_CONF is unset"
    )
    deterministic: bool = flag(
        False, "--deterministic",
        help="the exact path: fp32, NCHW, PyTorch for checkpoints, deterministic algorithms, no autotuning",
    )  # fmt: skip
    keep_cpu_memory: bool = flag(
        True, "--no-keep-cpu-memory",
        help=f"leave glibc's malloc thresholds as they are (default: freed CPU blocks up to {KEEP_BYTES >> 20} MiB "
        "stay with the process for reuse, which saves page faults on every pass)",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds
        parse_device(self.device)  # validates the spelling
        if self.half and self.amp in ("bf16", "fp16"):
            raise InputError(f"half runs fp16 weights without autocast; it cannot be combined with amp {self.amp!r}")
        if self.deterministic:
            flags = (("--half", self.half), (f"--amp {self.amp}", self.amp in ("bf16", "fp16")),
                     ("--channels-last", bool(self.channels_last)),
                     (f"--compile {self.compile}", self.compile != "off"))  # fmt: skip
            conflict = [name for name, on in flags if on]
            if conflict:
                raise InputError(f"--deterministic runs fp32 NCHW uncompiled; it cannot be combined with {conflict[0]}")


def add_runtime_arguments(parser: argparse.ArgumentParser, *, inference: bool = False) -> None:
    """The runtime flags shared by train, val, predict, bench and profile, from `RuntimeSettings`; `inference`
    adds `--half` (fp16 weights) and `--trust-code`, for commands that only run models forward."""
    add_flags(parser.add_argument_group("runtime"), RuntimeSettings, exclude=() if inference else INFERENCE_ONLY)

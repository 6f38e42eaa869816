"""The runtime flags of the command line, and the choices they take, without importing torch.

`tphyolo -h`, `tphyolo COMMAND -h` and argument errors build their parsers from this module, so they answer
in a fraction of a second; `tphyolo.runtime.config` turns the parsed flags into a `RuntimeConfig` and applies it.
"""

from __future__ import annotations

import argparse

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
            raise ValueError(f"device {spec!r} names a GPU twice")
        return [f"cuda:{p}" for p in parts]
    raise ValueError(f"bad device {spec!r}: use auto, cpu, cuda, cuda:N, N or N,M,...")


TRUST_CODE_FLAG = "--trust-code"  # allows loading weights that run their own code (TorchScript)


def add_runtime_arguments(parser: argparse.ArgumentParser, *, inference: bool = False) -> None:
    """The runtime flags shared by train, val, predict, bench and profile; `inference` adds `--half`
    (fp16 weights, for commands that only run models forward)."""
    group = parser.add_argument_group("runtime")
    group.add_argument("--device", default="auto", help="auto, cpu, cuda, N or N,M,... (default: auto)")
    group.add_argument(
        "--amp",
        default=None,
        nargs="?",
        const="auto",
        choices=AMP_CHOICES,
        help="autocast dtype; auto = bf16 on GPUs that support it, fp16 on older GPUs, off on CPU (default: auto)",
    )
    group.add_argument("--no-amp", action="store_true", help="same as --amp off")
    group.add_argument(
        "--compile",
        default="off",
        nargs="?",
        const="default",
        choices=COMPILE_CHOICES,
        help="torch.compile mode; bare --compile means 'default' (default: off)",
    )
    group.add_argument(
        "--channels-last",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="NHWC memory format for convolutions (default: on for inference on the CPU, off for training and on GPUs)",
    )
    if inference:
        group.add_argument("--half", action="store_true", help="fp16 weights and inputs, no autocast (CUDA only)")
        group.add_argument(
            TRUST_CODE_FLAG,
            action="store_true",
            help="load weights that are programs (.torchscript runs the code it carries); only for files you trust",
        )
    group.add_argument(
        "--sdpa-backend",
        action="append",
        choices=SDPA_BACKEND_NAMES,
        default=None,
        help="allow only this attention kernel; repeat to allow several (default: all)",
    )
    group.add_argument("--no-tf32", action="store_true", help="disable TensorFloat-32 matmuls/convolutions")
    group.add_argument(
        "--no-cudnn-benchmark", action="store_true", help="disable cuDNN autotuning of convolution algorithms"
    )
    group.add_argument(
        "--alloc-conf",
        default=DEFAULT_ALLOC_CONF,
        help=f"CUDA allocator settings used when PYTORCH_CUDA_ALLOC_CONF is unset (default: {DEFAULT_ALLOC_CONF})",
    )
    group.add_argument(
        "--no-keep-cpu-memory",
        action="store_true",
        help=f"leave glibc's malloc thresholds as they are (default: freed CPU blocks up to {KEEP_BYTES >> 20} MiB "
        "stay with the process for reuse, which saves page faults on every pass)",
    )

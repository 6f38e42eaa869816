"""Which scaled-dot-product-attention kernel actually runs: probed by running a call, not guessed from flags.

Used by `tphyolo doctor` (which backends run here) and `benchmarks/attention_vs_original.py` (which kernel a
timed block used).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from tphyolo.runtime.config import sdpa_backends
from tphyolo.runtime.flags import SDPA_BACKEND_NAMES

# aten operator -> kernel name reported to users.
KERNEL_OPS: dict[str, str] = {
    "_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
}


class _OpRecorder(TorchDispatchMode):
    """Records the names of the aten operators dispatched inside its context."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def kernel_that_ran(fn: Callable[[], object]) -> str:
    """Run `fn` once and name the SDPA kernel it dispatched to: a KERNEL_OPS value, "math", or "none"."""
    with _OpRecorder() as recorder:
        fn()
    for op in recorder.ops:
        if op in KERNEL_OPS:
            return KERNEL_OPS[op]
    # The math path decomposes into plain matmul/softmax operators.
    return "math" if any(op in ("bmm", "matmul", "_softmax", "softmax") for op in recorder.ops) else "none"


def _attention_inputs(device: torch.device, dtype: torch.dtype, masked: bool):
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 32, generator=generator).to(device, dtype) for _ in range(3))  # (B, nh, T, hs)
    mask = torch.randn(64, 64, generator=generator).to(device, dtype) if masked else None  # additive (T, T)
    return q, k, v, mask


def probe_sdpa(device: torch.device, dtype: torch.dtype) -> dict[str, dict[str, str]]:
    """For a small unmasked and a small masked (additive float mask) call on `device` in `dtype`:
    which kernel runs with all backends allowed ("default"), and whether each backend alone runs.

    Returns {"small": {"default": kernel, "flash": "ok" | error, ...}, "masked": {...}}.
    """
    from torch.nn.attention import sdpa_kernel

    results: dict[str, dict[str, str]] = {}
    for case, masked in (("small", False), ("masked", True)):
        q, k, v, mask = _attention_inputs(device, dtype, masked)

        def call(q=q, k=k, v=v, mask=mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

        row: dict[str, str] = {}
        try:
            row["default"] = kernel_that_ran(call)
        except RuntimeError as error:
            row["default"] = f"error: {_first_line(error)}"
        for name in SDPA_BACKEND_NAMES:
            try:
                with sdpa_kernel(sdpa_backends([name])):
                    call()
                row[name] = "ok"
            except RuntimeError as error:
                row[name] = f"unavailable: {_first_line(error)}"
        results[case] = row
    return results


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:160] if text else type(error).__name__

"""Timing and peak memory of one callable.

Time: `warmup` untimed calls, then `repeats` timed calls (wall clock, `time.perf_counter`; on CUDA the device
is synchronised before and after each call). Reported as the median and the spread (interquartile range,
p75 - p25) in milliseconds.

Peak memory, in MiB, of the tensors a call allocates beyond what was live before it (one extra, untimed call):

- CUDA: the caching allocator's statistics, `max_memory_allocated() - memory_allocated()` around the call
  after `reset_peak_memory_stats()`.
- CPU: the allocation and free events of PyTorch's CPU allocator as recorded by `torch.profiler` with
  `profile_memory=True`, replayed in time order; the peak of the running sum is the peak. This sees every
  tensor and workspace that goes through PyTorch's allocator (activations, saved tensors, gradients,
  temporaries), unlike `tracemalloc`, which sees only Python objects, and unlike the process RSS, which keeps
  pages that the allocator has freed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

MIB = 2**20

MEMORY_METHODS: dict[str, str] = {
    "cuda": "CUDA caching-allocator peak (max_memory_allocated) above the memory live before the call",
    "cpu": "torch.profiler CPU-allocator events (profile_memory=True): peak of live bytes allocated by the call",
}


@dataclass(frozen=True)
class Timing:
    """Wall-clock statistics of `repeats` calls, in milliseconds."""

    median_ms: float
    spread_ms: float  # interquartile range
    min_ms: float
    repeats: int


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], *, device: torch.device, warmup: int = 2, repeats: int = 5) -> Timing:
    """Runs `fn` `warmup` times untimed, then `repeats` times timed."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        samples.append((time.perf_counter() - start) * 1e3)
    if len(samples) >= 4:
        quartiles = statistics.quantiles(samples, n=4)
        spread = quartiles[2] - quartiles[0]
    else:
        spread = max(samples) - min(samples)
    return Timing(statistics.median(samples), spread, min(samples), repeats)


def peak_memory_mb(fn: Callable[[], object], *, device: torch.device) -> float:
    """Peak MiB allocated by one call of `fn` beyond what was live before it (see the module docstring)."""
    if device.type == "cuda":
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / MIB
    if device.type == "cpu":
        return _cpu_peak_bytes(fn) / MIB
    raise ValueError(f"peak memory is measured on cpu or cuda, not {device.type}")


def memory_method(device: torch.device) -> str:
    """How `peak_memory_mb` measures on `device`, in words."""
    return MEMORY_METHODS.get(device.type, "not measured")


def _cpu_peak_bytes(fn: Callable[[], object]) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [
        e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]" and e.device_type().name == "CPU"
    ]
    events.sort(key=lambda e: e.start_ns())
    live = peak = 0
    for event in events:
        live += event.nbytes()
        peak = max(peak, live)
    return peak


def matmul_flops_per_s(*, device: torch.device, dtype: torch.dtype = torch.float32, size: int = 1024) -> float:
    """The machine's measured dense matmul rate (FLOP/s) for `size x size` operands: 2 * size^3 per product,
    median of a few timed products after a warm-up."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    timing = time_call(lambda: a @ b, device=device, warmup=2, repeats=7)
    return 2 * size**3 / (timing.median_ms / 1e3)

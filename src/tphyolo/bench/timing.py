"""Timing and peak memory of one callable.

Time: `warmup` untimed calls, then `repeats` timed calls, by one of `CLOCKS`: "wall" (`time.perf_counter`;
on CUDA the device is synchronised before and after each call) or "cpu" (`time.process_time`, the CPU time of
the process summed over its threads, which other load on a shared machine disturbs less; meant for
single-threaded host work such as WBF and COCO evaluation). Reported as the median and the spread
(interquartile range, p75 - p25; max - min under 4 repeats) in milliseconds. A baseline and ours are timed
with their calls interleaved (`time_calls`), and `paired_speedup` takes the median of the per-pair ratios.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tphyolo.errors import InputError
from tphyolo.runtime.interleaved import time_interleaved

if TYPE_CHECKING:  # torch is imported where it is used: `tphyolo bench -h` reads CLOCKS without it
    import torch

MIB = 2**20

CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}

MEMORY_METHODS: dict[str, str] = {
    "cuda": "CUDA caching-allocator peak (max_memory_allocated) above the memory live before the call",
    "cpu": "torch.profiler CPU-allocator events (profile_memory=True): peak of live bytes allocated by the call",
}


@dataclass(frozen=True)
class Timing:
    """Statistics of the times of `repeats` calls, in milliseconds."""

    median_ms: float
    spread_ms: float  # interquartile range
    min_ms: float
    repeats: int
    samples_ms: tuple[float, ...] = ()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def time_call(
    fn: Callable[[], object], *, device: torch.device, warmup: int = 2, repeats: int = 5, clock: str = "wall"
) -> Timing:
    """Runs `fn` `warmup` times untimed, then `repeats` times timed by `clock` (see CLOCKS)."""
    return time_calls([fn], device=device, warmup=warmup, repeats=repeats, clock=clock)[0]


def time_calls(
    fns: Sequence[Callable[[], object]],
    *,
    device: torch.device,
    warmup: int = 2,
    repeats: int = 5,
    clock: str = "wall",
) -> list[Timing]:
    """Times several callables with their calls interleaved (`tphyolo.runtime.interleaved`: a b, b a, ...), so
    that a machine whose load changes during the measurement slows them alike; each gets `warmup` untimed calls
    first."""
    if repeats < 1:
        raise InputError(f"repeats must be at least 1, got {repeats}")
    if clock not in CLOCKS:
        raise InputError(f"unknown clock {clock!r}; known: {list(CLOCKS)}")
    seconds = time_interleaved(fns, warmup=warmup, rounds=repeats, clock=CLOCKS[clock],
                               after_call=lambda: synchronize(device))  # fmt: skip
    samples = [[s * 1e3 for s in times] for times in seconds]
    return [_statistics(times) for times in samples]


def paired_speedup(baseline: Timing, ours: Timing) -> float:
    """Median over the interleaved repeats of baseline time / our time (robust to load changes)."""
    return statistics.median(b / o for b, o in zip(baseline.samples_ms, ours.samples_ms, strict=True))


def _statistics(samples: list[float]) -> Timing:
    if len(samples) >= 4:
        quartiles = statistics.quantiles(samples, n=4)
        spread = quartiles[2] - quartiles[0]
    else:
        spread = max(samples) - min(samples)
    return Timing(statistics.median(samples), spread, min(samples), len(samples), tuple(samples))


def peak_memory_mb(fn: Callable[[], object], *, device: torch.device) -> float:
    """Peak MiB allocated by one call of `fn` beyond what was live before it (see the module docstring)."""
    if device.type == "cuda":
        import torch

        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / MIB
    if device.type == "cpu":
        return _cpu_peak_bytes(fn) / MIB
    raise InputError(f"peak memory is measured on cpu or cuda, not {device.type}")


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


def matmul_flops_per_s(*, device: torch.device, dtype: torch.dtype | None = None, size: int = 2048) -> float:
    """The machine's measured dense matmul rate (FLOP/s) for `size x size` operands of `dtype` (default fp32):
    2 * size^3 per product, median of a few timed products after a warm-up."""
    import torch

    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    timing = time_call(lambda: a @ b, device=device, warmup=2, repeats=7)
    return 2 * size**3 / (timing.median_ms / 1e3)

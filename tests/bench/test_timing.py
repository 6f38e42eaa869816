"""Timing statistics and the CPU peak-memory measurement."""

import pytest
import torch

from tphyolo.bench.timing import matmul_flops_per_s, memory_method, peak_memory_mb, time_call

CPU = torch.device("cpu")
MIB = 2**20


def test_time_call_counts_calls_and_orders_statistics():
    calls = []
    timing = time_call(lambda: calls.append(1), device=CPU, warmup=2, repeats=5)
    assert len(calls) == 7
    assert timing.repeats == 5
    assert 0 <= timing.min_ms <= timing.median_ms
    assert timing.spread_ms >= 0


def test_time_call_rejects_zero_repeats():
    with pytest.raises(ValueError, match="repeats"):
        time_call(lambda: None, device=CPU, repeats=0)


def test_cpu_peak_is_the_high_water_mark_of_the_call():
    def work():
        big = torch.empty(8 * MIB, dtype=torch.uint8)
        del big
        small = torch.empty(2 * MIB, dtype=torch.uint8)
        return small

    peak = peak_memory_mb(work, device=CPU)
    assert 8.0 <= peak < 8.5


def test_cpu_peak_counts_tensors_alive_together():
    def work():
        a = torch.empty(3 * MIB, dtype=torch.uint8)
        b = torch.empty(5 * MIB, dtype=torch.uint8)
        return a, b

    assert 8.0 <= peak_memory_mb(work, device=CPU) < 8.5


def test_memory_method_is_described():
    assert "profiler" in memory_method(CPU)


def test_matmul_rate_is_positive():
    assert matmul_flops_per_s(device=CPU, size=128) > 1e6


def test_time_calls_interleaves_and_pairs():
    from tphyolo.bench.timing import paired_speedup, time_calls

    order = []
    first, second = time_calls([lambda: order.append("a"), lambda: order.append("b")], device=CPU, warmup=1, repeats=3)
    assert order == ["a", "b"] + ["a", "b", "b", "a", "a", "b"]  # the warm-ups, then every other round reversed
    assert len(first.samples_ms) == len(second.samples_ms) == 3
    assert paired_speedup(first, first) == 1.0


def test_cpu_clock_counts_work_not_waiting():
    import time

    wait = lambda: time.sleep(0.05)  # noqa: E731
    assert time_call(wait, device=CPU, warmup=0, repeats=1).median_ms >= 50
    assert time_call(wait, device=CPU, warmup=0, repeats=1, clock="cpu").median_ms < 25
    with pytest.raises(ValueError, match="unknown clock"):
        time_call(wait, device=CPU, clock="sundial")

"""Large freed CPU blocks kept for reuse (`tphyolo.runtime.cpu_memory`): the page faults it saves, measured in child
processes, and when it leaves the allocator alone."""

import os
import platform
import subprocess
import sys

import pytest

from tphyolo.runtime import cpu_memory
from tphyolo.runtime.config import RuntimeConfig, configure_process
from tphyolo.runtime.cpu_memory import (
    KEEP_BYTES,
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    keep_freed_blocks,
    user_malloc_choice,
)

FAULTS_PER_PASS = """
import resource, sys, torch
PASSES = 12
from tphyolo.runtime.cpu_memory import keep_freed_blocks
if sys.argv[1] == "keep":
    assert keep_freed_blocks(environ={}) == "tphyolo"
faults = []
for _ in range(PASSES):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.empty(16 << 20).fill_(1.0)  # a 64 MiB tensor, written and freed, as activations are on every pass
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(min(faults[-4:]))
"""


def _faults_per_pass(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k not in cpu_memory.USER_SETTINGS_ENV}
    done = subprocess.run(
        [sys.executable, "-c", FAULTS_PER_PASS, mode], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_a_kept_block_is_reused_without_page_faults():
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's malloc thresholds exist only with glibc")
    default, kept = _faults_per_pass("default"), _faults_per_pass("keep")
    # glibc gives a 64 MiB block fresh pages every time (at least one fault per 2 MiB, one per 4 KiB without
    # huge pages). Kept in the heap, freed blocks are reused with their pages in place once the heap holds enough
    # of them: an aligned request needs a little more than the block it freed, so the first passes still grow it.
    assert default >= 32, default
    assert kept <= 8, kept


def test_the_users_allocator_choice_is_left_alone(mallopt_calls):
    assert user_malloc_choice({}) is None
    assert user_malloc_choice({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}) == "LD_PRELOAD=/usr/lib/libjemalloc.so.2"
    assert user_malloc_choice({"MALLOC_MMAP_THRESHOLD_": "65536"}) == "MALLOC_MMAP_THRESHOLD_=65536"
    assert user_malloc_choice({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}) is not None
    assert user_malloc_choice({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"}) is None
    assert keep_freed_blocks(environ={"MALLOC_TRIM_THRESHOLD_": "0"}) == "user"
    assert mallopt_calls == []


def test_configure_process_raises_both_thresholds_unless_told_not_to(mallopt_calls, monkeypatch):
    for name in cpu_memory.USER_SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)
    assert configure_process(RuntimeConfig(device="cpu", keep_cpu_memory=False))["cpu_memory"] == "off"
    assert mallopt_calls == []
    assert configure_process(RuntimeConfig(device="cpu"))["cpu_memory"] == "tphyolo"
    assert mallopt_calls == [(M_MMAP_THRESHOLD, KEEP_BYTES), (M_TRIM_THRESHOLD, KEEP_BYTES)]


def test_a_refused_value_is_reported(monkeypatch):
    monkeypatch.setattr(cpu_memory, "glibc_mallopt", lambda: lambda param, value: 0)
    assert keep_freed_blocks(environ={}) == "unavailable"
    monkeypatch.setattr(cpu_memory, "glibc_mallopt", lambda: None)
    assert keep_freed_blocks(environ={}) == "unavailable"

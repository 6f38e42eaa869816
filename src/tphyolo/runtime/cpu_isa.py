"""What the CPU can compute natively: its model name and instruction-set flags, as Linux reports them.

The runtime probe keys its cached choices by them (a choice measured on one CPU says nothing about another)
and offers bf16 autocast only where the CPU has native bf16 arithmetic (`has_native_bf16`): AMX-BF16 tiles or
the AVX512-BF16 dot products. Without them PyTorch emulates bf16 in fp32 registers, which is slower than fp32.
"""

from __future__ import annotations

import hashlib
import platform
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")

# (name shown to users, /proc/cpuinfo flag), oldest first.
ISA_FLAGS: tuple[tuple[str, str], ...] = (
    ("AVX2", "avx2"),
    ("AVX-512", "avx512f"),
    ("AVX512-VNNI", "avx512_vnni"),
    ("AVX512-BF16", "avx512_bf16"),
    ("AMX-BF16", "amx_bf16"),
    ("AMX-INT8", "amx_int8"),
)
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@dataclass(frozen=True)
class CpuInfo:
    """A CPU as the probe keys it: `model` (the model name) and `flags` (its instruction-set flags)."""

    model: str
    flags: frozenset[str]

    @property
    def isa(self) -> tuple[str, ...]:
        """The vector and matrix extensions it has, by name, from ISA_FLAGS (e.g. ("AVX2", "AVX-512", ...))."""
        return tuple(name for name, flag in ISA_FLAGS if flag in self.flags)

    @property
    def has_native_bf16(self) -> bool:
        """True when bf16 arithmetic runs in hardware (AMX-BF16 or AVX512-BF16)."""
        return any(flag in self.flags for flag in NATIVE_BF16_FLAGS)

    @property
    def fingerprint(self) -> str:
        """The model name and a digest of the sorted flags: what a cached measurement is valid for."""
        digest = hashlib.sha256(" ".join(sorted(self.flags)).encode()).hexdigest()[:16]
        return f"{self.model} | flags {digest}"


def parse_cpuinfo(text: str) -> CpuInfo:
    """The first processor's model name and flags in the text of /proc/cpuinfo (empty when absent)."""
    model, flags = "", frozenset[str]()
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if not sep:
            continue
        name = name.strip()
        if name == "model name" and not model:
            model = value.strip()
        elif name == "flags" and not flags:
            flags = frozenset(value.split())
    return CpuInfo(model=model, flags=flags)


def cpu_info(path: Path = CPUINFO) -> CpuInfo:
    """This machine's CPU: from `path` (/proc/cpuinfo) where it can be read, else the processor name of
    `platform` without flags (then no native bf16 is assumed)."""
    try:
        found = parse_cpuinfo(path.read_text(errors="replace"))
    except OSError:
        found = CpuInfo(model="", flags=frozenset())
    return found if found.model else CpuInfo(model=platform.processor() or platform.machine(), flags=found.flags)

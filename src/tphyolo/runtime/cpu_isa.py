"""What the CPU can compute natively: its model name and instruction-set flags, as Linux reports them.

The decisions of `tphyolo.runtime.decisions` are keyed by them (a choice measured on one CPU says nothing about
another), and its rule takes bf16 only where the CPU has native bf16 arithmetic (`has_native_bf16`): AMX-BF16 tiles or
the AVX512-BF16 dot products. Without them PyTorch emulates bf16 in fp32 registers, which is slower than fp32.

A cap on oneDNN's instruction set (`ONEDNN_MAX_CPU_ISA`, or its older name `DNNL_MAX_CPU_ISA`, read by the
oneDNN kernels PyTorch's CPU convolutions run on) caps what this module reports too: a CPU told to stop at
AVX512_CORE_VNNI is one without native bf16 for the decisions and the compiled runtime, as it is for its kernels.
"""

from __future__ import annotations

import hashlib
import os
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
ISA_CAP_ENV = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
# oneDNN's ISA names, lowest first, each with the flag prefixes a cap below it removes (oneDNN's documented
# values; its AVX10_1_512 names rank with the AVX-512 FP16/AMX ones they equal).
ISA_CAP_LEVELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("SSE41", ()),
    ("AVX", ()),
    ("AVX2", ("avx2",)),
    ("AVX2_VNNI", ()),
    ("AVX2_VNNI_2", ()),
    ("AVX512_CORE", ("avx512",)),
    ("AVX512_CORE_VNNI", ("avx512_vnni",)),
    ("AVX512_CORE_BF16", ("avx512_bf16",)),
    ("AVX512_CORE_FP16", ("avx512_fp16",)),
    ("AVX512_CORE_AMX", ("amx",)),
    ("AVX512_CORE_AMX_FP16", ()),
)
ISA_CAP_ALIASES = {"AVX10_1_512": "AVX512_CORE_FP16", "AVX10_1_512_AMX": "AVX512_CORE_AMX",
                   "AVX10_1_512_AMX_FP16": "AVX512_CORE_AMX_FP16"}  # fmt: skip


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


def capped(cpu: CpuInfo, cap: str | None) -> CpuInfo:
    """`cpu` with the flags of the extensions above oneDNN's ISA `cap` (e.g. "AVX512_CORE_VNNI") removed; `cpu`
    itself for no cap, "DEFAULT", or a name oneDNN does not have (oneDNN ignores those too)."""
    names = [name for name, _ in ISA_CAP_LEVELS]
    level = ISA_CAP_ALIASES.get((cap or "").strip().upper(), (cap or "").strip().upper())
    if level not in names:
        return cpu
    above = [prefix for _, prefixes in ISA_CAP_LEVELS[names.index(level) + 1 :] for prefix in prefixes]
    return CpuInfo(cpu.model, frozenset(f for f in cpu.flags if not any(f.startswith(p) for p in above)))


def cpu_info(path: Path = CPUINFO) -> CpuInfo:
    """This machine's CPU: from `path` (/proc/cpuinfo) where it can be read, else the processor name of
    `platform` without flags (then no native bf16 is assumed); capped by `ONEDNN_MAX_CPU_ISA` when set."""
    try:
        found = parse_cpuinfo(path.read_text(errors="replace"))
    except OSError:
        found = CpuInfo(model="", flags=frozenset())
    if not found.model:
        found = CpuInfo(model=platform.processor() or platform.machine(), flags=found.flags)
    return capped(found, next((os.environ[name] for name in ISA_CAP_ENV if os.environ.get(name)), None))

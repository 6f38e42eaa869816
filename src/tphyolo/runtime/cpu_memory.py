"""Large CPU blocks kept for reuse: glibc's malloc thresholds raised for a process that runs models.

glibc serves a block above its mmap threshold (128 KiB at start, raised by itself to at most 32 MiB) with
fresh pages from the kernel and gives them back on free. Each large tensor is then page-faulted in again, 4 KiB
at a time, every time it is allocated, and a model allocates and frees its activations on every pass:
tph-yolov5n at 1536 px, batch 2, took about a million page faults per inference pass. `keep_freed_blocks`
raises glibc's mmap and trim thresholds to `KEEP_BYTES`, so that freed blocks stay in the heap and the next
pass reuses them. The cost: up to `KEEP_BYTES` of freed memory stays with the process instead of going back
to the system. (PyTorch's CPU tuning guides get the same effect by preloading jemalloc or tcmalloc.)

Left alone, and reported as such: a preloaded allocator, the user's own glibc malloc settings (MALLOC_*_
variables or `glibc.malloc.*` tunables), and C libraries other than glibc. Importing this module changes
nothing; `tphyolo.runtime.config.configure_process` calls `keep_freed_blocks` once per process.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections.abc import Callable, Mapping

KEEP_BYTES = 1 << 30  # blocks up to 1 GiB come from the heap and stay there when freed
USER_MALLOC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
PRELOADED_ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")
USER_SETTINGS_ENV = ("LD_PRELOAD", "GLIBC_TUNABLES", *USER_MALLOC_ENV)  # every variable `user_malloc_choice` reads
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt() parameters, from glibc's malloc.h


def user_malloc_choice(environ: Mapping[str, str] = os.environ) -> str | None:
    """What in `environ` says the user chose the allocator or its settings (for example "LD_PRELOAD=...jemalloc"),
    or None."""
    preload = environ.get("LD_PRELOAD", "")
    if any(name in preload for name in PRELOADED_ALLOCATORS):
        return f"LD_PRELOAD={preload}"
    for name in USER_MALLOC_ENV:
        if name in environ:
            return f"{name}={environ[name]}"
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return f"GLIBC_TUNABLES={environ['GLIBC_TUNABLES']}"
    return None


def glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's `int mallopt(int param, int value)`, or None where the C library is not glibc."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return None
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt


def keep_freed_blocks(limit: int = KEEP_BYTES, *, environ: Mapping[str, str] = os.environ) -> str:
    """Raise this process's glibc mmap and trim thresholds to `limit` bytes (see the module docstring).
    Returns "tphyolo" when raised, "user" when the user's own allocator choice (`user_malloc_choice`) left
    them alone, "unavailable" where the C library is not glibc or refused the values."""
    if user_malloc_choice(environ) is not None:
        return "user"
    mallopt = glibc_mallopt()
    if mallopt is None:
        return "unavailable"
    if not (mallopt(M_MMAP_THRESHOLD, limit) and mallopt(M_TRIM_THRESHOLD, limit)):
        return "unavailable"
    return "tphyolo"

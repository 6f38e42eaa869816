"""The CPU cores this process may use: the one count every thread and worker default starts from. Light (the
standard library only), so that `tphyolo doctor` and the exported runtimes can ask without the data stack."""

from __future__ import annotations

import os


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one, else all)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1

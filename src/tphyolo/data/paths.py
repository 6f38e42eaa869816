"""File-system helpers shared by the caches."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/tphyolo` (default `~/.cache/tphyolo`): the synthetic sets, and scan caches of datasets
    whose own folders are read-only."""
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "tphyolo"


def is_read_only_folder(folder: Path) -> bool:
    """True when `folder` has no write permission bit at all. Such a folder is treated as read-only even by
    a user (root) whom the OS would let write there: caches never go into read-only reference data."""
    return stat.S_IMODE(Path(folder).stat().st_mode) & 0o222 == 0

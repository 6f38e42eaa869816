"""File-system helpers shared by the caches."""

from __future__ import annotations

import stat
from pathlib import Path


def is_read_only_folder(folder: Path) -> bool:
    """True when `folder` has no write permission bit at all. Such a folder is treated as read-only even by
    a user (root) whom the OS would let write there: caches never go into read-only reference data."""
    return stat.S_IMODE(Path(folder).stat().st_mode) & 0o222 == 0

"""Run folders: runs/<task>/<name>, numbered name2, name3, ... unless exist_ok."""

from __future__ import annotations

from pathlib import Path


def new_run_dir(project: str | Path, name: str, *, exist_ok: bool = False) -> Path:
    """Create and return project/name, or the first free project/nameN (N = 2, 3, ...) unless `exist_ok`."""
    base = Path(project) / name
    path = base
    if not exist_ok:
        n = 2
        while path.exists():
            path = base.with_name(f"{base.name}{n}")
            n += 1
    path.mkdir(parents=True, exist_ok=True)
    return path

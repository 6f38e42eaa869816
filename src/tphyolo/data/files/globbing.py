"""Glob patterns over folders that may hold symlink loops: each real folder is walked once.

Python's `glob.glob(pattern, recursive=True)` follows every symlinked folder under `**`, so a link back up the
tree (`a/b -> a`) makes it list the same folders again and again, exponentially in their number, until paths
reach the OS's length limit: a `--source 'data/**/*.jpg'` hangs. `glob_once` matches the same patterns (`*`,
`?`, `[...]` within a name, `**` for any number of folders, names starting with `.` only by a pattern part
starting with `.`) while visiting each real folder once, by the shortest path that reaches it.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from pathlib import Path


def glob_once(pattern: str) -> list[Path]:
    """The paths (files, folders and links of any kind, sorted) that `pattern` matches; see the module
    docstring. A pattern without `**` is `glob.glob`'s, which follows no link twice."""
    if "**" not in pattern:
        return sorted(Path(p) for p in glob.glob(pattern))
    parts = Path(os.path.expanduser(pattern)).parts
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    base = Path(*parts[:fixed]) if fixed else Path(".")
    wanted = parts[fixed:]
    found, seen = [], set()
    for folder, dirs, files in os.walk(base, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link back to a folder walked already: not again, nor below it
            dirs.clear()
            continue
        seen.add(real)
        relative = Path(folder).relative_to(base).parts
        for name in (*dirs, *files):
            if _matches((*relative, name), wanted):
                found.append(Path(folder) / name)
    return sorted(found)


def _matches(parts: tuple[str, ...], wanted: tuple[str, ...]) -> bool:
    if not wanted:
        return not parts
    if wanted[0] == "**":
        return _matches(parts, wanted[1:]) or (
            bool(parts) and not parts[0].startswith(".") and _matches(parts[1:], wanted)
        )
    if not parts or (parts[0].startswith(".") and not wanted[0].startswith(".")):
        return False
    return fnmatch.fnmatchcase(parts[0], wanted[0]) and _matches(parts[1:], wanted[1:])

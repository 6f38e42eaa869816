"""File-system helpers shared by the readers and the caches: what kind of file a path is, and whether a folder
may be written."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from tphyolo.errors import InputError

NO_SUCH_FILE = "no such file"
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),  # a named pipe
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def regular_file_problem(path: str | Path) -> str | None:
    """None when `path` is a regular file (symbolic links followed), else what it is instead: "no such
    file", "a directory", "a FIFO", "a character device" (e.g. a link to /dev/zero), "a block
    device", "a socket", "a symbolic link to a missing target", "a symbolic link loop", or the OS's reason it
    cannot be looked at. Never opens the path: reading a FIFO blocks and a device never ends."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "a symbolic link loop"
        if os.path.islink(path):
            return "a symbolic link to a missing target"
        if error.errno == errno.ENOENT:
            return NO_SUCH_FILE
        return (error.strerror or str(error)).lower()
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def require_regular_file(path: str | Path) -> Path:
    """`path` when it is a regular file (links followed). Raises FileNotFoundError naming it when nothing is
    there, ValueError naming it and what it is instead otherwise (`regular_file_problem`); never opens it."""
    path = Path(path)
    problem = regular_file_problem(path)
    if problem is None:
        return path
    if problem == NO_SUCH_FILE:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    raise InputError(f"{path}: not a regular file ({problem})")


def is_read_only_folder(folder: Path) -> bool:
    """True when `folder` has no write permission bit at all. Such a folder is treated as read-only even by
    a user (root) whom the OS would let write there: caches never go into read-only reference data."""
    return stat.S_IMODE(Path(folder).stat().st_mode) & 0o222 == 0

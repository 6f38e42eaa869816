"""One-line descriptions of the errors bad input and faults raise: the file named first, then the cause.

    describe_error(OSError(28, "No space left on device", "runs/exp/weights/last.pt"))
    -> "runs/exp/weights/last.pt: no space left on device"

The command line prints these (see `tphyolo.cli.main`); commands that skip a file and go on print them too.
Bad input the package finds itself raises `InputError` (or a subclass: `UsageError`, `ImageError`, ...).
"""

from __future__ import annotations

import errno

# Causes as a user reads them, for the errors faults raise most (the rest use the OS's own words).
_CAUSES = {
    errno.ENOSPC: "no space left on device",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "no such file or directory",
    errno.EDQUOT: "disk quota exceeded",
}


def describe_error(error: BaseException) -> str:
    """`error` as one line: `PATH: cause` for an OSError that names its file, else the message's first line
    (messages of this package start with the file they are about)."""
    if isinstance(error, OSError) and error.errno is not None:
        cause = _CAUSES.get(error.errno) or (error.strerror or str(error)).lower()
        if error.filename is not None:
            target = f" -> {error.filename2}" if error.filename2 is not None else ""
            return f"{error.filename}{target}: {cause}"
        return cause
    text = str(error).strip()
    if not text:
        return type(error).__name__
    lines = text.splitlines()
    if len(lines) > 1 and "Traceback (most recent call last)" in text:
        # an error re-raised from a worker process (a DataLoader's) carries the worker's traceback: its last
        # line is the original `module.Error: message`
        kind, _, message = lines[-1].partition(": ")
        return message if message and " " not in kind else lines[-1]
    return lines[0] if len(lines) == 1 else f"{lines[0]} (+{len(lines) - 1} more line(s))"


class InputError(ValueError):
    """Bad input, as the package reports it: a file, a setting or a value it cannot use, in one line that names
    it first (`describe_error`). The command line ends with that line and exit code 2; a ValueError of another
    kind is a fault of the program and ends it with its traceback. A ValueError, so that callers catching
    ValueError catch it."""


class UsageError(InputError):
    """A bad value on the command line, found after parsing; reported in one line with exit code 2."""

"""Writing a file that a later command reads, in one step: to a temporary name beside it, then renamed into
place (`os.replace`, atomic on POSIX file systems). A reader never finds it half-written: it finds the previous
version or the new one. A write that fails (no space left, read-only, permission denied) leaves the previous
version as it was, removes the temporary, and raises an OSError whose filename is the destination, so that the
one-line error names the file the user asked for.

    with atomic_path(out / "model.onnx") as tmp:   # any writer that takes a path
        torch.onnx.export(model, x, tmp)
    write_text_atomic(out / "predictions.json", text)
    write_file_atomic(out / "last.pt", lambda file: torch.save(state, file))   # any writer of a binary file

The `write_*_atomic` functions also fsync the file before the rename and the folder after it, so that once they
return the new version survives a power loss (checkpoints are written so).

A writer killed mid-write (SIGKILL, power loss) cannot clean up: its temporary `.STEM.PID.tmpSUFFIX` (or a folder
moved aside, `.NAME.PID.old`) stays beside the file. The next write of the same file clears what processes no
longer running left there (`clear_stale`): their temporaries are removed, and a folder moved aside goes back in
place when the folder itself is missing (the writer died between the two renames). A PID is judged on this
machine: folders shared between machines must not be written by two of them at once.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` (same folder and suffix) for the block to write, a file or a folder;
    renamed to `path` when the block ends without error (replacing a file or folder there), removed
    otherwise. OSError of the block or of the rename names `path`."""
    path = Path(path)
    clear_stale(path)
    tmp = _temporary(path)
    _remove(tmp)
    with _named_errors(path, remove=tmp):
        yield tmp
        _install(tmp, path)


@contextlib.contextmanager
def staged_path(path: str | Path) -> Iterator[Path]:
    """As `atomic_path`, for a block that needs the file under its own name (writers that name what is inside
    after it, readers that check it before it goes in place): `path`'s name inside a hidden folder beside it
    (the temporary of `atomic_path`), moved to `path` when the block ends without error; the folder goes
    either way."""
    path = Path(path)
    clear_stale(path)
    staging = _temporary(path)
    _remove(staging)
    with _named_errors(path, remove=staging):
        staging.mkdir()
        yield staging / path.name
        _install(staging / path.name, path)
        _remove(staging)


@contextlib.contextmanager
def _named_errors(path: Path, *, remove: Path) -> Iterator[None]:
    """Removes `remove` when the block fails, and makes its OSError name `path`."""
    try:
        yield
    except BaseException as error:
        with contextlib.suppress(OSError):  # on a read-only mount, removing fails as writing did
            _remove(remove)
        if isinstance(error, OSError) and error.errno is not None and error.filename != str(path):
            raise OSError(error.errno, error.strerror, str(path)) from error
        raise


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")


def _install(tmp: Path, path: Path) -> None:
    """Renames `tmp` to `path`; a folder there, or anything where a folder goes, is moved aside first."""
    if (tmp.is_dir() or path.is_dir()) and os.path.lexists(path):  # a rename replaces a file by a file only
        old = path.with_name(f".{path.name}.{os.getpid()}.old")
        os.replace(path, old)
        os.replace(tmp, path)
        _remove(old)
    else:
        os.replace(tmp, path)


def write_file_atomic(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Write `path` in one step (module docstring) with `write(file)`, `file` the temporary opened for binary
    writing: flushed and fsynced before the rename, the folder fsynced after it. Returns the path."""
    path = Path(path)
    with atomic_path(path) as tmp, tmp.open("wb") as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())
    _fsync_folder(path.parent)
    return path


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` in one step, synced (`write_file_atomic`); returns the path."""
    return write_file_atomic(path, lambda file: file.write(data))


def _fsync_folder(folder: Path) -> None:
    """Makes a rename in `folder` durable (a no-op where folders cannot be opened, e.g. Windows)."""
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` in one step (module docstring); returns the path. File names that are not
    UTF-8 (decoded by Python with surrogate escapes) keep their original bytes."""
    return write_bytes_atomic(path, text.encode("utf-8", errors="surrogateescape"))


def clear_stale(path: str | Path) -> list[Path]:
    """Clears what writers of `path` that no longer run left beside it (module docstring); returns the entries
    removed or moved back. Entries of running processes, this one included, are left alone."""
    path = Path(path)
    temporary = re.compile(rf"^\.+{re.escape(path.stem)}\.(\d+)\.tmp.*{re.escape(path.suffix)}$")  # nested too
    aside = re.compile(rf"^\.{re.escape(path.name)}\.(\d+)\.old$")
    try:
        entries = sorted(path.parent.iterdir())
    except OSError:  # no folder yet, or not readable: the write itself will say so
        return []
    cleared = []
    for entry in entries:
        match = temporary.match(entry.name) or aside.match(entry.name)
        if match is None or _running(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):  # another writer cleared it first
            if match.re is aside and not path.exists():
                os.replace(entry, path)
            else:
                _remove(entry)
            cleared.append(entry)
    return cleared


def _running(pid: int) -> bool:
    """Whether process `pid` exists on this machine (a PID too large for the system exists nowhere)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except (OverflowError, ValueError):
        return False
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)

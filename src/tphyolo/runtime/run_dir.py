"""Run folders: runs/<task>/<name>, numbered name2, name3, ... unless exist_ok; `OutputDir`, their flags."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tphyolo.flags import flag


def new_run_dir(project: str | Path, name: str, *, exist_ok: bool = False) -> Path:
    """Create and return project/name, or the first free project/nameN (N = 2, 3, ...) unless `exist_ok`.

    Each name is taken by creating it (`mkdir` fails on an existing entry), never by looking first: runs
    started together, in threads or processes, each get a folder of their own."""
    base = Path(project) / name
    if exist_ok:
        base.mkdir(parents=True, exist_ok=True)
        return base
    base.parent.mkdir(parents=True, exist_ok=True)
    path, n = base, 2
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:  # taken (by an earlier run, or one that won the race): the next name
            path = base.with_name(f"{base.name}{n}")
            n += 1


def remove_if_empty(path: Path, *, ignoring: Iterable[str] = ()) -> bool:
    """Remove folder `path` when it holds no file (only empty folders, if any) but those under the names
    `ignoring` at its top (a run's settings, its journal), which go with it; returns whether it did."""
    path = Path(path)
    if not path.is_dir():
        return False
    files = [p for p in path.rglob("*") if p.is_file() or p.is_symlink()]
    if any(p.relative_to(path).parts[0] not in set(ignoring) for p in files):
        return False
    for file in files:
        file.unlink()
    for folder in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        folder.rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()
    return not path.exists()


@contextlib.contextmanager
def removed_if_left_empty(path: str | Path | None, *, ignoring: Iterable[str] = ()) -> Iterator[None]:
    """Run the block; should it raise, remove folder `path` when it holds no file but the run's own bookkeeping
    (the files named `ignoring`, such as its saved settings; `remove_if_empty`): a command that fails before
    producing anything leaves no numbered folder behind to shift the next run's name. A folder that held files
    when the block began (an earlier run's, under --exist-ok) is left as it is."""
    fresh = path is not None and not (Path(path).is_dir() and any(Path(path).iterdir()))
    try:
        yield
    except BaseException:
        if fresh:
            remove_if_empty(Path(path), ignoring=ignoring)
        raise


@dataclass(frozen=True)
class OutputDir:
    """Where a command writes its outputs: `project/name`, or the first free `name2`, `name3`, ... unless
    `exist_ok`. Each field is also a command-line flag."""

    project: str | None = flag(None, "--project", help="output root (default: runs/<command>)")
    name: str = flag("exp", "--name", help="output folder under --project")
    exist_ok: bool = flag(False, "--exist-ok", help="reuse an existing output folder")

    def create(self, default_project: str | Path) -> Path:
        """Create the folder (under `default_project` when `project` is None) and return it."""
        return new_run_dir(self.project or default_project, self.name, exist_ok=self.exist_ok)

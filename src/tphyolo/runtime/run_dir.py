"""Run folders: runs/<task>/<name>, numbered name2, name3, ... unless exist_ok (`OutputDir`, their flags), and
the job each keeps.

A run's job is kept as plain data: a run folder's args.yaml holds it under `JOB_KEY`, so that the run can
be read again, resumed and compared with the job of a resume.

    write_job_file(save_dir / JOB_FILE, job)                  # {"job": job_data(job)}
    job = job_from_data(PredictJob, saved["job"], where="runs/predict/exp/args.yaml")

`job_data(job)` turns a frozen job (nested frozen dataclasses, tuples, paths, enums) into data `yaml.safe_dump`
writes: a mapping per dataclass (its fields in order), a list per tuple, text per path (made absolute), an
enum's value. Callables (hooks such as `ValConfig.on_problems`) are not settings and are left out; any other
object that is not plain data (a model given in memory) is recorded by its type, as text (`<Model object>`), which
reads back as that text: such a job is recorded, not repeatable. Text that names an existing
file or folder, or a glob, in a field named in `PATH_FIELDS` (sources, weights, data sets, ...) is made
absolute too, so that a resume from another working directory finds it.

`job_from_data(cls, data, where=...)` reads it back: each mapping into its field's dataclass, lists into tuples,
text into a `Path` where the field is one, and each dataclass checked by `tphyolo.flags.check_field_types` as the
flags are checked; a field the file omits keeps its default. A value the checks refuse, or a field the class does
not have, raises InputError in one line naming `where` and the field (`detector.inference.conf`).

`differences(then, now)` lists the settings two jobs' data differ in, by dotted name, with both values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import inspect
import os
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.errors import InputError
from tphyolo.flags import check_field_types, field_types, flag


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


JOB_FILE = "args.yaml"  # a run folder's settings
JOB_KEY = "job"  # the job's data in it
PATH_FIELDS = frozenset({"source", "weights", "classifier", "coco_gt", "data", "detections", "tracks", "lines",
                         "tracker", "resume", "json"})  # fmt: skip


def job_data(job: Any, *, path_fields: frozenset[str] = PATH_FIELDS) -> dict[str, Any]:
    """`job` (a dataclass instance) as plain data (module docstring); text in the fields `path_fields` names
    that is a file, folder or glob is made absolute."""
    return _plain(job, path_fields=path_fields, is_path=False)


def _plain(value: Any, *, path_fields: frozenset[str], is_path: bool) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if not field.init or _is_hook(item):
                continue  # derived, or a hook: not a setting
            data[field.name] = _plain(item, path_fields=path_fields, is_path=field.name in path_fields)
        return data
    if isinstance(value, (tuple, list)):
        return [_plain(item, path_fields=path_fields, is_path=is_path) for item in value]
    if isinstance(value, Path):
        return os.path.abspath(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, str):
        return os.path.abspath(value) if is_path and _names_a_path(value) else value
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return f"<{type(value).__qualname__} object>"  # a model given in memory: named, not kept


def _is_hook(value: Any) -> bool:
    """Whether `value` is a function handed to a run (a callback, a folder maker), not a setting or a model."""
    return isinstance(value, functools.partial) or inspect.isroutine(inspect.unwrap(value))


def _names_a_path(text: str) -> bool:
    """Whether `text` is an existing file or folder, or a glob of them (not a URL)."""
    return "://" not in text and (Path(text).exists() or any(c in text for c in "*?["))


def _joined(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def job_from_data(cls: type, data: Any, *, where: str) -> Any:
    """The `cls` job `data` (`job_data`'s) describes (module docstring). Raises InputError naming `where` and
    the field for a value the checks refuse, a field `cls` does not have, or data that is not a mapping."""
    from tphyolo.runtime.config import RuntimeConfig  # lazy: torch; a spec names it only for type checkers

    return _build(cls, data, "", where=where, names={"RuntimeConfig": RuntimeConfig})


def _build(cls: type, data: Any, name: str, *, where: str, names: dict[str, Any]) -> Any:
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: {name or 'job'}: expected a mapping (the settings of {cls.__name__}), "
                         f"got {type(data).__name__}")  # fmt: skip
    hints = field_types(cls, names)
    own = {field.name for field in dataclasses.fields(cls) if field.init}
    unknown = [key for key in data if key not in own]
    if unknown:
        raise InputError(f"{where}: {_joined(name, str(unknown[0]))}: not a setting of {cls.__name__}")
    values = {key: _value(hints[key], item, _joined(name, key), where=where, names=names)
              for key, item in data.items()}  # fmt: skip
    try:
        built = cls(**values)
        check_field_types(built)
    except (TypeError, ValueError) as error:  # InputError is a ValueError
        raise InputError(f"{where}: {name or cls.__name__}: {error}") from None
    return built


def _value(annotation: Any, value: Any, name: str, *, where: str, names: dict[str, Any]) -> Any:
    """`value` read from a file as the field `annotation` holds it."""
    if value is None:
        return None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)]
        settings = next((k for k in kinds if dataclasses.is_dataclass(k)), None)
        if settings is not None and (isinstance(value, Mapping) or len(kinds) == 1):
            return _build(settings, value, name, where=where, names=names)
        if isinstance(value, list):
            kind = next((k for k in kinds if typing.get_origin(k) is tuple), Any)
            return _value(kind, value, name, where=where, names=names)
        if isinstance(value, str) and Path in kinds and str not in kinds:
            return Path(value)
        return value
    if dataclasses.is_dataclass(annotation):
        return _build(annotation, value, name, where=where, names=names)
    if isinstance(value, list):
        inner = typing.get_args(annotation)[0] if origin is tuple else Any
        return tuple(_value(inner, item, name, where=where, names=names) for item in value)
    if annotation is Path and isinstance(value, str):
        return Path(value)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        try:
            return annotation(value)
        except ValueError:
            raise InputError(f"{where}: {name}: {value!r} is not a {annotation.__name__}") from None
    return value


def differences(then: Mapping[str, Any], now: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted name, value in `then`, value in `now`) for each setting two jobs' data (`job_data`) differ in,
    in the order of `then`'s fields (a setting only one of them has is None in the other)."""
    old, new = _flat(then), _flat(now)
    return [(key, old.get(key), new.get(key)) for key in dict.fromkeys([*old, *new]) if old.get(key) != new.get(key)]


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat |= _flat(value, _joined(prefix, key))
        else:
            flat[_joined(prefix, key)] = value
    return flat


def write_job_file(path: Path, job: Any, **record: Any) -> None:
    """Write `job` (`job_data`) under JOB_KEY to `path` with the plain data `record` (a resume's fingerprint)
    beside it, atomically."""
    write_text_atomic(Path(path), yaml.safe_dump({JOB_KEY: job_data(job), **record}, sort_keys=False))

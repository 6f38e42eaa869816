"""The journal of a run into a run folder: which units of work are finished, and what they found, so that an
interrupted run resumes without redoing them (`tphyolo.predict.runner.units`).

Each process appends to `RUN/.journal/rankR.jsonl` one JSON line per unit once every output of it is written: a
record (`UnitRecord`: a unit of files, `sources.source_units`, a group of images or a video; a raster's row of
tiles has its own, `predict.raster.RowRecord`) that names its unit (`unit`) and says what it found. A unit
without a whole line (the run stopped while writing its outputs, or while writing the line) is not finished:
a resumed run does it again, whole, so that its batches are those of an uninterrupted run.

A journal is read as untrusted input: each line is checked (`UnitRecord.from_json`: JSON nested at most a few
levels, counts whole and bounded, rows of six finite numbers with a score in [0, 1] and a known class, frames of
the unit's own files) and must name a unit of the run; a line that fails is reported (file:line) and its unit
is redone.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import torch

from tphyolo.errors import InputError

JOURNAL_DIR = ".journal"
MAX_COUNT = 10**9  # detections, skipped files or frames of one unit


class Record(Protocol):
    """What a journal line holds: a finished unit, named by `unit` (one of the run's units), as one JSON line."""

    @property
    def unit(self) -> Hashable: ...

    def to_json(self) -> str: ...


R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class FrameRecord:
    """One frame's detections: its file's output name, frame index, the name predictions.json gives it, and
    rows (N, 6) float32 x1, y1, x2, y2, score, class in original pixels (`Detections.rows`)."""

    file: str
    index: int
    name: str
    rows: torch.Tensor


@dataclass(frozen=True)
class UnitRecord:
    """A finished unit: its files' output names, detections and skipped files counted, frames (only when
    predictions.json is asked for), and frames that came with a warning."""

    files: tuple[str, ...]
    detections: int
    skipped: int
    frames: tuple[FrameRecord, ...] = field(default=())
    warned: int = 0

    @property
    def unit(self) -> tuple[str, ...]:
        return self.files

    def to_json(self) -> str:
        frames = [[f.file, f.index, f.name, f.rows.tolist()] for f in self.frames]  # float32 values, exactly
        return json.dumps({"files": list(self.files), "detections": self.detections, "skipped": self.skipped,
                           "frames": frames, "warned": self.warned})  # fmt: skip

    @classmethod
    def from_json(cls, line: str, *, classes: int | None = None) -> UnitRecord:
        """The unit of a journal line; ValueError saying what is wrong (module docstring), class ids checked
        against `classes` when given."""
        data = journal_object(line, keys=("files", "detections", "skipped", "frames"))
        files = data["files"]
        if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
            raise InputError("'files' is not a list of output names")
        counts = [checked_count(data, key) for key in ("detections", "skipped", "warned")]
        if not isinstance(data["frames"], list):
            raise InputError("'frames' is not a list")
        frames = tuple(_frame(item, set(files), classes) for item in data["frames"])
        if frames and sum(len(f.rows) for f in frames) != counts[0]:
            raise InputError(f"{sum(len(f.rows) for f in frames)} rows for {counts[0]} detections")
        return cls(tuple(files), counts[0], counts[1], frames, counts[2])


def journal_object(line: str, *, keys: tuple[str, ...]) -> dict:
    """The JSON object of a journal line, holding `keys`; ValueError saying what is wrong (cut short, nested
    too deep, not a record of this kind)."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        raise InputError("not a whole JSON line (cut short?)") from None
    except RecursionError:
        raise InputError("nested deeper than a journal line is") from None
    if not isinstance(data, dict) or not set(keys) <= data.keys():
        raise InputError(f"not a journal record ({', '.join(keys)})")
    return data


def checked_count(data: dict, key: str) -> int:
    """`data[key]` (0 when absent), a whole number from 0 to MAX_COUNT; ValueError naming the key otherwise."""
    value = data.get(key, 0)
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise InputError(f"{key!r} {str(value)[:40]} is not a count from 0 to {MAX_COUNT:,}")
    return value


def _frame(item, files: set[str], classes: int | None) -> FrameRecord:
    """A FrameRecord from its JSON [file, index, name, rows]; ValueError saying what is wrong."""
    if not isinstance(item, list) or len(item) != 4:
        raise InputError("a frame is not [file, index, name, rows]")
    file, index, name, rows = item
    if file not in files or not isinstance(name, str):
        raise InputError(f"a frame names file {str(file)[:80]!r}, not one of the unit's")
    if type(index) is not int or not 0 <= index <= MAX_COUNT:
        raise InputError(f"frame index {str(index)[:40]} of {file} is not a whole number from 0")
    return FrameRecord(file, index, name, checked_rows(rows, classes, where=f"{file} frame {index}"))


def checked_rows(rows, classes: int | None, *, where: str) -> torch.Tensor:
    """The (N, 6) float32 tensor of journaled `rows` (JSON lists x1, y1, x2, y2, score, class); ValueError naming
    `where` for a row that is not six finite numbers with a score in [0, 1] and a class id below `classes`."""
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 6 for r in rows):
        raise InputError(f"rows of {where} are not (N, 6) x1, y1, x2, y2, score, class")
    for row in rows:
        if not all(type(v) in (int, float) and math.isfinite(v) for v in row):
            raise InputError(f"a row of {where} holds a value that is not a finite number")
        score, label = row[4], row[5]
        if not 0 <= score <= 1 or label != int(label) or label < 0 or (classes is not None and label >= classes):
            raise InputError(f"a row of {where} has score {score} and class {label} (of {classes})")
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 6)


class Journal:
    """The journal file of one process (rank `rank`) in `run_dir`; `record` appends a finished unit. A line an
    interrupted run left cut short is ended first, so that the lines appended after it parse."""

    def __init__(self, run_dir: Path, rank: int) -> None:
        self.path = Path(run_dir) / JOURNAL_DIR / f"rank{rank}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_file() and self.path.stat().st_size:
            with self.path.open("rb+") as f:
                f.seek(-1, 2)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    def record(self, unit: Record) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(unit.to_json() + "\n")
            f.flush()


def finished_records(
    run_dir: Path,
    *,
    read: Callable[[str], R],
    units: Collection[Hashable] | None = None,
    on_bad: Callable[[str], None] | None = None,
) -> list[R]:
    """The units the journals of `run_dir` (of any number of processes) record as finished, each line checked
    by `read` (a line -> its record; ValueError saying what is wrong) and, given `units` (the run's units, as
    records name them), naming one of them. A line that fails does not count: `on_bad` gets "FILE:LINE: what is
    wrong; its unit is redone". A unit recorded twice counts once."""
    found: dict[Hashable, R] = {}
    known = None if units is None else set(units)
    for path in sorted((Path(run_dir) / JOURNAL_DIR).glob("rank*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            try:
                record = read(line)
                if known is not None and record.unit not in known:
                    raise InputError(f"unit {_shown(record.unit)} is not one of this run's (a source removed?)")
            except ValueError as error:
                if on_bad is not None:
                    on_bad(f"{path}:{n}: {error}; its unit is redone")
                continue
            found[record.unit] = record
    return list(found.values())


def _shown(unit: Hashable) -> str:
    return str(list(unit)[:3]) if isinstance(unit, tuple) else repr(unit)[:120]


def clear_journal(run_dir: Path) -> None:
    """Forget what an earlier run in `run_dir` finished (a new run that reuses the folder)."""
    shutil.rmtree(Path(run_dir) / JOURNAL_DIR, ignore_errors=True)

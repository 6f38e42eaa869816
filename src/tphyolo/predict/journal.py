"""The journal of a prediction into a run folder: which units of files are finished, and what they found, so
that an interrupted run resumes without redoing them.

Each process appends to `RUN/.journal/rankR.jsonl` one JSON line per unit (`sources.source_units`: a group of
images, a video) once every output of every file in it is written: the output names of its files, how many
detections and skipped files it had, and, when predictions.json is asked for, each frame's detections. A unit
without a whole line (the run stopped while writing its outputs, or while writing the line) is not finished:
a resumed run does it again, whole, so that its batches are those of an uninterrupted run.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import torch

JOURNAL_DIR = ".journal"


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

    def to_json(self) -> str:
        frames = [[f.file, f.index, f.name, f.rows.tolist()] for f in self.frames]  # float32 values, exactly
        return json.dumps({"files": list(self.files), "detections": self.detections, "skipped": self.skipped,
                           "frames": frames, "warned": self.warned})  # fmt: skip

    @classmethod
    def from_json(cls, line: str) -> UnitRecord:
        data = json.loads(line)
        frames = tuple(FrameRecord(f, int(i), n, torch.tensor(rows, dtype=torch.float32).reshape(-1, 6))
                       for f, i, n, rows in data["frames"])  # fmt: skip
        return cls(tuple(data["files"]), int(data["detections"]), int(data["skipped"]), frames,
                   int(data.get("warned", 0)))  # fmt: skip


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

    def record(self, unit: UnitRecord) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(unit.to_json() + "\n")
            f.flush()


def finished_units(run_dir: Path) -> list[UnitRecord]:
    """The units the journals of `run_dir` (of any number of processes) record as finished; a line that does
    not parse (cut short) does not count. A unit recorded twice counts once."""
    units: dict[tuple[str, ...], UnitRecord] = {}
    for path in sorted((Path(run_dir) / JOURNAL_DIR).glob("rank*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                unit = UnitRecord.from_json(line)
            except (ValueError, KeyError, TypeError):
                continue
            units[unit.files] = unit
    return list(units.values())


def clear_journal(run_dir: Path) -> None:
    """Forget what an earlier run in `run_dir` finished (a new run that reuses the folder)."""
    shutil.rmtree(Path(run_dir) / JOURNAL_DIR, ignore_errors=True)


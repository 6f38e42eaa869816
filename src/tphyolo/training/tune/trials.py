"""The table of a search: trials.csv (a row per trial), the history a resumed search starts from, and
best_hyp.yaml.

trials.csv has the columns `trial, state, fitness, mAP50, mAP50-95, epochs` and then one per hyp key, in the
hyp file's order. It is rewritten whole (to a temporary file, then renamed) each time a trial starts or ends,
so that it always holds every trial so far and is never half-written: it is what `tune --resume` reads.
fitness, mAP50 and mAP50-95 are those of the trial's best epoch (0.1 mAP50 + 0.9 mAP50-95, the trainer's
best.pt criterion); epochs is how many it trained.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from tphyolo.data.files.atomic import atomic_path, write_text_atomic
from tphyolo.errors import InputError
from tphyolo.training.tune.evolution import Scored

# running: started; done: trained every epoch; stopped: stopped early by the scheduler (or by --patience);
# error: the trial raised; interrupted: running when the search stopped (a resumed search does not count it).
STATES = ("running", "done", "stopped", "error", "interrupted")
FINISHED = ("done", "stopped")  # states whose fitness a resumed search learns from
COUNTED = ("done", "stopped", "error")  # states that count towards --trials
COLUMNS = ("trial", "state", "fitness", "mAP50", "mAP50-95", "epochs")


@dataclass(frozen=True)
class TrialRow:
    """One trial: its number, state, best epoch's fitness, mAP50 and mAP50-95 (nan before its first epoch or
    after an error), epochs trained, and the whole hyp it trained with."""

    trial: int
    state: str
    fitness: float
    map50: float
    map50_95: float
    epochs: int
    hyp: Mapping[str, float]

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise InputError(f"trial {self.trial}: unknown state {self.state!r}; known: {STATES}")


def write_trials(path: Path, rows: Sequence[TrialRow]) -> None:
    """trials.csv with `rows` ordered by trial number (module docstring), replaced in one step."""
    rows = sorted(rows, key=lambda row: row.trial)
    keys = list(rows[0].hyp) if rows else []
    with atomic_path(path) as tmp, tmp.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*COLUMNS, *keys])
        for row in rows:
            hyp = [row.hyp.get(key, math.nan) for key in keys]
            writer.writerow([row.trial, row.state, row.fitness, row.map50, row.map50_95, row.epochs, *hyp])


def read_trials(path: Path) -> list[TrialRow]:
    """The rows of a trials.csv. Raises ValueError naming the file and line of anything unreadable."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            lines = list(csv.reader(f))
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start}); not a trials table") from None
    if not lines or tuple(lines[0][: len(COLUMNS)]) != COLUMNS:
        raise InputError(f"{path}: not a trials table (the first line must start with {','.join(COLUMNS)})")
    keys = lines[0][len(COLUMNS) :]
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            if len(line) != len(COLUMNS) + len(keys):
                raise InputError(f"{len(line)} fields, expected {len(COLUMNS) + len(keys)}")
            trial, state, fitness, map50, map50_95, epochs = line[: len(COLUMNS)]
            hyp = {key: _number(value) for key, value in zip(keys, line[len(COLUMNS) :], strict=True)}
            rows.append(TrialRow(int(trial), state, float(fitness), float(map50), float(map50_95), int(epochs), hyp))
        except ValueError as error:
            raise InputError(f"{path}:{number}: {error}") from None
    return rows


def _number(text: str) -> float:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def history(rows: Sequence[TrialRow], keys: Sequence[str]) -> list[Scored]:
    """What a resumed search knows: the searched `keys`' values and fitness of each finished trial."""
    return [
        Scored({key: row.hyp[key] for key in keys}, row.fitness)
        for row in rows
        if row.state in FINISHED and math.isfinite(row.fitness)
    ]


def best_trial(rows: Sequence[TrialRow]) -> TrialRow | None:
    """The finished trial of highest fitness (the first of equals), or None when none finished."""
    finished = [row for row in rows if row.state in FINISHED and math.isfinite(row.fitness)]
    return max(finished, key=lambda row: row.fitness, default=None)


def write_best_hyp(path: Path, row: TrialRow, *, base: str) -> None:
    """best_hyp.yaml: the whole hyp of trial `row`, a hyp file `train --hyp` reads as it is, with a comment
    saying where it comes from (`base`: the hyp file the search started from)."""
    header = (
        f"# Best of a hyperparameter search from {base}: trial {row.trial}, fitness {row.fitness:.5f}\n"
        f"# (mAP50 {row.map50:.5f}, mAP50-95 {row.map50_95:.5f} after {row.epochs} epoch(s)).\n"
    )
    write_text_atomic(path, header + yaml.safe_dump(dict(row.hyp), sort_keys=False))  # `train --hyp` reads it

"""The table of a search: trials.csv (a row per trial), kept current and printed as trials end (`TrialTable`),
the history a resumed search starts from, best_hyp.yaml, the final table printed and trials.png.

trials.csv has the columns `trial, state, fitness, mAP50, mAP50-95, epochs` and then one per hyp key, in the
hyp file's order. It is rewritten whole (to a temporary file, then renamed) each time a trial starts or ends,
so that it always holds every trial so far and is never half-written: it is what `tune --resume` reads.
fitness, mAP50 and mAP50-95 are those of the trial's best epoch (0.1 mAP50 + 0.9 mAP50-95, the trainer's
best.pt criterion); epochs is how many it trained. `TrialTable` reads each trial's number and searched values
from its config (`searchers.TRIAL_KEY`), and each epoch's report from the trial (`REPORT_KEYS`, sent by
`trainable.ReportToTune`).

trials.png shows a search at a glance, as YOLOv5's evolve plot: fitness per trial, then a panel per searched
hyperparameter with each finished trial's value against its fitness, coloured by fitness, the best trial marked
with a cross and its value in the title. It is drawn on matplotlib's Agg canvas; the process-wide backend is left
alone.
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import yaml

from tphyolo.data.files.atomic import atomic_path, write_text_atomic
from tphyolo.errors import InputError
from tphyolo.training.tune.searchers import TRIAL_KEY, Scored
from tphyolo.training.tune.space import SearchSpace

# running: started; done: trained every epoch; stopped: stopped early by the scheduler (or by --patience);
# error: the trial raised; interrupted: running when the search stopped (a resumed search does not count it).
STATES = ("running", "done", "stopped", "error", "interrupted")
FINISHED = ("done", "stopped")  # states whose fitness a resumed search learns from
COUNTED = ("done", "stopped", "error")  # states that count towards --trials
COLUMNS = ("trial", "state", "fitness", "mAP50", "mAP50-95", "epochs")
PANELS_PER_ROW = 5  # of trials.png
# What a trial reports after each epoch: its best epoch's fitness, mAP50 and mAP50-95, and epochs trained.
REPORT_KEYS = ("fitness", "mAP50", "mAP50-95", "epoch")


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


def final_table(rows: Sequence[TrialRow], *, most: int = 10) -> str:
    """The `most` fittest trials, best first, as a table (then how many are not shown)."""
    ranked = sorted(rows, key=lambda r: (not math.isfinite(r.fitness), -r.fitness if math.isfinite(r.fitness) else 0))
    lines = [f"{'trial':>5}  {'state':<11}{'fitness':>9}{'mAP50':>9}{'mAP50-95':>10}{'epochs':>8}"]
    for row in ranked[:most]:
        lines.append(f"{row.trial:>5}  {row.state:<11}{row.fitness:>9.4f}{row.map50:>9.4f}{row.map50_95:>10.4f}"
                     f"{row.epochs:>8}")  # fmt: skip
    if len(ranked) > most:
        lines.append(f"({len(ranked) - most} more in trials.csv)")
    return "\n".join(lines)


def plot_trials(rows: Sequence[TrialRow], keys: Sequence[str], path: Path) -> Path | None:
    """Write the figure of the finished trials of `rows` over the searched `keys` to `path`; None (no file)
    when no trial finished."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    finished = sorted((row for row in rows if row.state in FINISHED and math.isfinite(row.fitness)),
                      key=lambda row: row.trial)  # fmt: skip
    best = best_trial(finished)
    if best is None:
        return None
    fitness = np.array([row.fitness for row in finished])
    panels = 1 + len(keys)
    height = -(-panels // PANELS_PER_ROW)
    fig = Figure(figsize=(3.2 * min(panels, PANELS_PER_ROW), 3.0 * height), tight_layout=True)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(height, min(panels, PANELS_PER_ROW), 1)
    trials = [row.trial for row in finished]
    ax.scatter(trials, fitness, c=fitness, cmap="viridis", s=18, edgecolors="none")
    ax.plot(trials, np.maximum.accumulate(fitness), color="grey", linewidth=1, label="best so far")
    ax.plot(best.trial, best.fitness, "k+", markersize=12)
    ax.set(xlabel="trial", ylabel="fitness", title=f"best: trial {best.trial} ({best.fitness:.4f})")
    ax.legend(loc="lower right", fontsize=7)
    for k, key in enumerate(keys, start=2):
        ax = fig.add_subplot(height, min(panels, PANELS_PER_ROW), k)
        values = [row.hyp[key] for row in finished]
        ax.scatter(values, fitness, c=fitness, cmap="viridis", s=18, edgecolors="none")
        ax.plot(best.hyp[key], best.fitness, "k+", markersize=12)
        ax.set_title(f"{key} = {best.hyp[key]:.4g}", fontsize=9)
        ax.tick_params(labelsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def trial_line(row: TrialRow, *, total: int) -> str:
    """The line printed when a trial ends."""
    numbers = f"fitness {row.fitness:.4f}  mAP50 {row.map50:.4f}  mAP50-95 {row.map50_95:.4f}"
    return f"trial {row.trial:>3}/{total}  {row.state:<7}  {numbers}  {row.epochs} epoch(s)"


def error_summary(trial: Any) -> str:
    """The last line of a failed trial's traceback (Ray's error.txt, plain text) and where the whole of it is."""
    staged = Path(trial.error_file) if trial.error_file else None
    cause = ""
    if staged is not None and staged.is_file():
        lines = [line for line in staged.read_text(errors="replace").splitlines() if line.strip()]
        cause = f"{lines[-1].strip()} " if lines else ""
    where = Path(trial.path) / staged.name if trial.path and staged is not None else staged or "ray.log"
    return f"{cause}({where})"


class TrialTable:
    """Keeps trials.csv (`table`) current: a row when a trial starts, its numbers after each epoch, its state
    when it ends (done when it trained all `epochs`, stopped when it ended before); prints `trial_line` to
    `stream` for each trial that ends. `rows`: the trials of an earlier session of the search (resumed);
    `total`: the number of trials the search runs in all. Its methods are those of a Tune `Callback`, which Tune
    calls in the process that started the search."""

    def __init__(
        self,
        table: Path,
        *,
        space: SearchSpace,
        epochs: int,
        total: int,
        stream: TextIO,
        rows: Sequence[TrialRow] = (),
    ) -> None:
        self.table, self.space, self.epochs, self.total, self.stream = table, space, epochs, total, stream
        self.rows: dict[int, TrialRow] = {row.trial: row for row in rows}

    def __getstate__(self) -> dict[str, Any]:
        """Tune saves its callbacks with the experiment; the output stream is not saved."""
        return {k: v for k, v in self.__dict__.items() if k != "stream"}

    def _row(self, trial: Any) -> TrialRow:
        number = int(trial.config[TRIAL_KEY])
        if number not in self.rows:
            values = {k: v for k, v in trial.config.items() if k != TRIAL_KEY}
            self.rows[number] = TrialRow(number, "running", math.nan, math.nan, math.nan, 0, self.space.hyp(values))
        return self.rows[number]

    def _update(self, row: TrialRow, result: dict | None, **changes: Any) -> TrialRow:
        if result and all(key in result for key in REPORT_KEYS):
            changes = {"fitness": float(result["fitness"]), "map50": float(result["mAP50"]),
                       "map50_95": float(result["mAP50-95"]), "epochs": int(result["epoch"])} | changes  # fmt: skip
        row = replace(row, **changes)
        self.rows[row.trial] = row
        write_trials(self.table, list(self.rows.values()))
        return row

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._update(self._row(trial), None)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        self._update(self._row(trial), result)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        row = self._update(self._row(trial), trial.last_result)
        row = self._update(row, None, state="done" if row.epochs >= self.epochs else "stopped")
        print(trial_line(row, total=self.total), file=self.stream, flush=True)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        row = self._update(self._row(trial), trial.last_result, state="error")
        print(f"{trial_line(row, total=self.total)}  {error_summary(trial)}", file=self.stream, flush=True)

    def interrupted(self) -> None:
        """Marks the trials still running as interrupted (the search stopped under them)."""
        for row in list(self.rows.values()):
            if row.state == "running":
                self._update(row, None, state="interrupted")


@functools.cache
def table_callback_class() -> type:
    """TrialTable as a Ray Tune `Callback`, made on first use: Ray is an optional extra, imported when a search
    starts."""
    from ray.tune import Callback

    class TableCallback(TrialTable, Callback):
        """A TrialTable that Ray Tune calls as its callback."""

    return TableCallback

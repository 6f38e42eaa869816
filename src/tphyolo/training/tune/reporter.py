"""What the driver of a search keeps and prints as trials run: trials.csv, and a line per finished trial.

`TrialTable` gets the trials' starts, results and ends from Ray Tune (through `ray_adapters`' TableCallback, in
the process that started the search). It reads each trial's number and searched values from its config
(`ray_adapters.TRIAL_KEY`), and each epoch's report from the trial (`REPORT_KEYS`, sent by
`trainable.run_trial`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from tphyolo.training.tune.ray_adapters import TRIAL_KEY
from tphyolo.training.tune.space import SearchSpace
from tphyolo.training.tune.trials import TrialRow, write_trials

# What a trial reports after each epoch: its best epoch's fitness, mAP50 and mAP50-95, and epochs trained.
REPORT_KEYS = ("fitness", "mAP50", "mAP50-95", "epoch")


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


class TrialTable:
    """Keeps trials.csv (`table`) current: a row when a trial starts, its numbers after each epoch, its state
    when it ends (done when it trained all `epochs`, stopped when it ended before); prints `trial_line` to
    `stream` for each trial that ends. `rows`: the trials of an earlier session of the search (resumed);
    `total`: the number of trials the search runs in all."""

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

    def on_trial_start(self, trial: Any) -> None:
        self._update(self._row(trial), None)

    def on_trial_result(self, trial: Any, result: dict) -> None:
        self._update(self._row(trial), result)

    def on_trial_complete(self, trial: Any) -> None:
        row = self._update(self._row(trial), trial.last_result)
        row = self._update(row, None, state="done" if row.epochs >= self.epochs else "stopped")
        print(trial_line(row, total=self.total), file=self.stream, flush=True)

    def on_trial_error(self, trial: Any) -> None:
        row = self._update(self._row(trial), trial.last_result, state="error")
        print(f"{trial_line(row, total=self.total)}  {error_summary(trial)}", file=self.stream, flush=True)

    def interrupted(self) -> None:
        """Marks the trials still running as interrupted (the search stopped under them)."""
        for row in list(self.rows.values()):
            if row.state == "running":
                self._update(row, None, state="interrupted")

"""trials.png: a search at a glance, as YOLOv5's evolve plot shows it.

The first panel is fitness per trial; then one panel per searched hyperparameter with each finished trial's
value against its fitness, coloured by fitness, the best trial marked with a cross and its value in the title.
Drawn on matplotlib's Agg canvas; the process-wide backend is left alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tphyolo.training.tune.trials import FINISHED, TrialRow, best_trial

COLUMNS = 5  # panels per row


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
    height = -(-panels // COLUMNS)
    fig = Figure(figsize=(3.2 * min(panels, COLUMNS), 3.0 * height), tight_layout=True)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(height, min(panels, COLUMNS), 1)
    trials = [row.trial for row in finished]
    ax.scatter(trials, fitness, c=fitness, cmap="viridis", s=18, edgecolors="none")
    ax.plot(trials, np.maximum.accumulate(fitness), color="grey", linewidth=1, label="best so far")
    ax.plot(best.trial, best.fitness, "k+", markersize=12)
    ax.set(xlabel="trial", ylabel="fitness", title=f"best: trial {best.trial} ({best.fitness:.4f})")
    ax.legend(loc="lower right", fontsize=7)
    for k, key in enumerate(keys, start=2):
        ax = fig.add_subplot(height, min(panels, COLUMNS), k)
        values = [row.hyp[key] for row in finished]
        ax.scatter(values, fitness, c=fitness, cmap="viridis", s=18, edgecolors="none")
        ax.plot(best.hyp[key], best.fitness, "k+", markersize=12)
        ax.set_title(f"{key} = {best.hyp[key]:.4g}", fontsize=9)
        ax.tick_params(labelsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path

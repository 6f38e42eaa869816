"""Metric plots as PNG files: PR, F1, P and R curves per class (or empty ones that say why there are none), and the
confusion matrix, as counts or normalised.

Figures are drawn on matplotlib's Agg canvas directly; the process-wide backend is left alone.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tphyolo.metrics.ap import APResult

MAX_LEGEND_CLASSES = 20  # above this many classes, curves get no per-class legend
CURVES = ("PR", "F1", "P", "R")  # the curve files, NAME_curve.png


def _figure(size=(9, 6)):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, tight_layout=True)
    FigureCanvasAgg(fig)
    return fig


def _curves(path: Path, x: np.ndarray, ys: np.ndarray, labels: Sequence[str], mean_label: str, xlabel, ylabel,
            note: str = ""):  # fmt: skip
    fig = _figure()
    ax = fig.add_subplot()
    legend = len(labels) <= MAX_LEGEND_CLASSES
    for y, label in zip(ys, labels, strict=True):
        ax.plot(x, y, linewidth=1, label=label if legend else None)
    ax.plot(x, ys.mean(0) if len(ys) else np.zeros_like(x), linewidth=3, color="blue", label=mean_label)
    ax.set(xlabel=xlabel, ylabel=ylabel, xlim=(0, 1), ylim=(0, 1))
    ax.legend(bbox_to_anchor=(1.04, 1), loc="upper left")
    if note:
        ax.text(0.5, 0.5, textwrap.fill(note, 60), ha="center", va="center", transform=ax.transAxes)
    fig.savefig(path, dpi=150)


def plot_empty_curves(reason: str, save_dir: Path) -> list[Path]:
    """The four files of `plot_curves`, flat at zero and each saying `reason` (why there is no curve to draw)."""
    save_dir.mkdir(parents=True, exist_ok=True)
    paths = [save_dir / f"{n}_curve.png" for n in CURVES]
    x, none = np.linspace(0, 1, 2), np.zeros((0, 2))
    axes = (("Recall", "Precision"), ("Confidence", "F1"), ("Confidence", "Precision"), ("Confidence", "Recall"))
    for path, (xlabel, ylabel) in zip(paths, axes, strict=True):
        _curves(path, x, none, [], "all classes 0.000", xlabel, ylabel, note=reason)
    return paths


def plot_curves(result: APResult, names: Sequence[str], save_dir: Path) -> list[Path]:
    """PR_curve.png, F1_curve.png, P_curve.png, R_curve.png in `save_dir`; `names` indexed by class id."""
    save_dir.mkdir(parents=True, exist_ok=True)
    labels = [f"{names[c]} {ap:.3f}" for c, ap in zip(result.classes, result.ap50, strict=True)]
    plain = [str(names[c]) for c in result.classes]
    paths = [save_dir / f"{n}_curve.png" for n in CURVES]
    _curves(paths[0], result.px, result.pr_curve, labels, f"all classes {result.ap50.mean():.3f} mAP@0.5",
            "Recall", "Precision")  # fmt: skip
    for path, curve, ylabel in zip(
        paths[1:], (result.f1_curve, result.p_curve, result.r_curve), ("F1", "Precision", "Recall"), strict=True
    ):
        mean = curve.mean(0)
        best = int(mean.argmax())
        _curves(path, result.px, curve, plain, f"all classes {mean[best]:.2f} at {result.px[best]:.3f}",
                "Confidence", ylabel)  # fmt: skip
    return paths


def plot_confusion_matrix(matrix: np.ndarray, names: Sequence[str], path: Path, *, counts: bool = False) -> Path:
    """The (nc + 1, nc + 1) matrix [predicted, true] as a heat map, background last: normalised (each true class's
    column sums to 1), or with `counts` the objects and detections counted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = matrix.shape[0]
    fig = _figure((12, 9))
    ax = fig.add_subplot()
    shown = np.where(matrix < (0.5 if counts else 0.005), np.nan, matrix)  # hide empty and near-zero cells
    image = ax.imshow(shown, cmap="Blues", vmin=0, vmax=max(float(matrix.max()), 1.0) if counts else 1)
    fig.colorbar(image, ax=ax)
    ticks = [*map(str, names), "background"] if len(names) + 1 == n and n < 31 else None
    if ticks:
        ax.set_xticks(range(n), ticks, rotation=90)
        ax.set_yticks(range(n), ticks)
        for i in range(n):
            for j in range(n):
                if not np.isnan(shown[i, j]):
                    ax.text(j, i, f"{shown[i, j]:.0f}" if counts else f"{shown[i, j]:.2f}", ha="center", va="center",
                            fontsize=7)  # fmt: skip
    ax.set(xlabel="True", ylabel="Predicted", title="Confusion matrix" + ("" if counts else " (normalised)"))
    fig.savefig(path, dpi=150)
    return path

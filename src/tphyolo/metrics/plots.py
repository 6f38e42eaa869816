"""Metric plots as PNG files: PR, F1, P and R curves per class, and the normalised confusion matrix.

Figures are drawn on matplotlib's Agg canvas directly; the process-wide backend is left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tphyolo.metrics.ap import APResult

MAX_LEGEND_CLASSES = 20  # above this many classes, curves get no per-class legend


def _figure(size=(9, 6)):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, tight_layout=True)
    FigureCanvasAgg(fig)
    return fig


def _curves(path: Path, x: np.ndarray, ys: np.ndarray, labels: Sequence[str], mean_label: str, xlabel, ylabel):
    fig = _figure()
    ax = fig.add_subplot()
    legend = len(labels) <= MAX_LEGEND_CLASSES
    for y, label in zip(ys, labels, strict=True):
        ax.plot(x, y, linewidth=1, label=label if legend else None)
    ax.plot(x, ys.mean(0), linewidth=3, color="blue", label=mean_label)
    ax.set(xlabel=xlabel, ylabel=ylabel, xlim=(0, 1), ylim=(0, 1))
    ax.legend(bbox_to_anchor=(1.04, 1), loc="upper left")
    fig.savefig(path, dpi=150)


def plot_curves(result: APResult, names: Sequence[str], save_dir: Path) -> list[Path]:
    """PR_curve.png, F1_curve.png, P_curve.png, R_curve.png in `save_dir`; `names` indexed by class id."""
    save_dir.mkdir(parents=True, exist_ok=True)
    labels = [f"{names[c]} {ap:.3f}" for c, ap in zip(result.classes, result.ap50, strict=True)]
    plain = [str(names[c]) for c in result.classes]
    paths = [save_dir / f"{n}_curve.png" for n in ("PR", "F1", "P", "R")]
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


def plot_confusion_matrix(normalized: np.ndarray, names: Sequence[str], path: Path) -> Path:
    """The (nc + 1, nc + 1) normalised matrix [predicted, true] as a heat map, background last."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = normalized.shape[0]
    fig = _figure((12, 9))
    ax = fig.add_subplot()
    shown = np.where(normalized < 0.005, np.nan, normalized)  # hide near-zero cells
    image = ax.imshow(shown, cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax)
    ticks = [*map(str, names), "background"] if len(names) + 1 == n and n < 31 else None
    if ticks:
        ax.set_xticks(range(n), ticks, rotation=90)
        ax.set_yticks(range(n), ticks)
        for i in range(n):
            for j in range(n):
                if not np.isnan(shown[i, j]):
                    ax.text(j, i, f"{shown[i, j]:.2f}", ha="center", va="center", fontsize=7)
    ax.set(xlabel="True", ylabel="Predicted")
    fig.savefig(path, dpi=150)
    return path

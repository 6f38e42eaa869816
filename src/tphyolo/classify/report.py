"""Classification accuracy: the confusion matrix, per-class accuracy, a text table and a heat-map plot.

The matrix is indexed [predicted, true], as the detection confusion matrix of `tphyolo.metrics.confusion`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Accuracy:
    """Counts of one evaluation: matrix (K, K) int64 [predicted, true] and the K class names."""

    matrix: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def from_predictions(cls, predicted: np.ndarray, true: np.ndarray, names: Sequence[str]) -> Accuracy:
        k = len(names)
        matrix = np.zeros((k, k), dtype=np.int64)
        np.add.at(matrix, (np.asarray(predicted, np.int64), np.asarray(true, np.int64)), 1)
        return cls(matrix, tuple(names))

    @property
    def support(self) -> np.ndarray:
        """(K,) crops of each true class."""
        return self.matrix.sum(0)

    @property
    def accuracy(self) -> float:
        """Fraction of all crops classified correctly (0 when there are none)."""
        total = self.matrix.sum()
        return float(np.trace(self.matrix) / total) if total else 0.0

    @property
    def per_class(self) -> np.ndarray:
        """(K,) recall of each true class; NaN for a class without crops."""
        support = self.support
        return np.divide(np.diag(self.matrix), support, out=np.full(len(support), np.nan), where=support > 0)

    @property
    def mean_class(self) -> float:
        """Mean of the per-class accuracies over classes that have crops (balanced accuracy)."""
        values = self.per_class[self.support > 0]
        return float(values.mean()) if len(values) else 0.0

    def table(self) -> str:
        """Per-class accuracy and crop counts, then the overall and mean-class accuracy."""
        width = max(12, *(len(n) for n in self.names))
        lines = [f"{'class':>{width}} {'crops':>7} {'accuracy':>9}"]
        for name, n, acc in zip(self.names, self.support, self.per_class, strict=True):
            lines.append(f"{name:>{width}} {n:>7d} {acc:>9.3f}")
        lines.append(f"{'all':>{width}} {int(self.support.sum()):>7d} {self.accuracy:>9.3f}")
        lines.append(f"{'mean class':>{width}} {'':>7} {self.mean_class:>9.3f}")
        return "\n".join(lines)

    def matrix_text(self) -> str:
        """The confusion matrix as text: one row per predicted class, one column per true class."""
        width = max(11, *(len(n) for n in self.names)) + 1
        corner = "pred \\ true"
        lines = [f"{corner:>{width}}" + "".join(f"{n:>{width}}" for n in self.names)]
        for name, row in zip(self.names, self.matrix, strict=True):
            lines.append(f"{name:>{width}}" + "".join(f"{v:>{width}d}" for v in row))
        return "\n".join(lines)


def plot_confusion(accuracy: Accuracy, path: Path) -> Path:
    """The matrix normalised by true class (columns) as a heat map with counts, written to `path` (PNG)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    support = accuracy.support
    normalized = np.divide(accuracy.matrix, support, out=np.zeros(accuracy.matrix.shape), where=support > 0)
    k = len(accuracy.names)
    fig = Figure(figsize=(2.5 + 0.9 * k, 2 + 0.8 * k), tight_layout=True)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    image = ax.imshow(normalized, cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax)
    ax.set_xticks(range(k), accuracy.names, rotation=45, ha="right")
    ax.set_yticks(range(k), accuracy.names)
    for i in range(k):
        for j in range(k):
            colour = "white" if normalized[i, j] > 0.5 else "black"
            ax.text(j, i, f"{normalized[i, j]:.2f}\n({accuracy.matrix[i, j]})", ha="center", va="center",
                    fontsize=8, color=colour)  # fmt: skip
    ax.set(xlabel="True", ylabel="Predicted", title=f"accuracy {accuracy.accuracy:.3f}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path

"""The report's plots as PNG files: AP50 and recall by size (overall, and AP50 per class), PR curves,
confusion matrix, score histograms of true and false positives, and the dataset's objects per image and object
sizes.

Figures are drawn on matplotlib's Agg canvas directly; the process-wide backend is left alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tphyolo.metrics.plots import plot_confusion_matrix
from tphyolo.report.data import ReportData
from tphyolo.report.sizes import BUCKET_LABELS, BUCKETS

DPI = 80


def _figure(size=(7, 4)):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, tight_layout=True)
    FigureCanvasAgg(fig)
    return fig


def _size_plot(data: ReportData, path: Path) -> None:
    fig = _figure()
    ax = fig.add_subplot()
    x = np.arange(len(BUCKET_LABELS))
    cells = [data.sizes.overall[label] for label in BUCKET_LABELS]
    ap = [c.ap50 if c.ap50 is not None else 0.0 for c in cells]
    recall = [c.recall if c.recall is not None else 0.0 for c in cells]
    ax.bar(x - 0.2, ap, 0.4, label="AP50", color="#3465a4")
    ax.bar(x + 0.2, recall, 0.4, label="recall", color="#f57900")
    for k, c in enumerate(cells):
        ax.text(x[k], 1.02, f"n={c.objects}", ha="center", fontsize=8)
    ax.set(xticks=x, xticklabels=[f"{label} px" for label in BUCKET_LABELS], ylim=(0, 1.12),
           xlabel="object side sqrt(w*h), original pixels", ylabel="fraction")  # fmt: skip
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.savefig(path, dpi=DPI)


def _size_heatmap(data: ReportData, path: Path) -> None:
    """AP50 per class (rows) and size bucket (columns), blank where the class has no object of that size."""
    classes = list(data.sizes.per_class)
    fig = _figure((7, 0.9 + 0.35 * max(1, len(classes))))
    ax = fig.add_subplot()
    values = np.array(
        [[np.nan if (a := row[b].ap50) is None else a for b in BUCKET_LABELS] for row in data.sizes.per_class.values()]
    ).reshape(len(classes), len(BUCKET_LABELS))
    image = ax.imshow(values, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for (i, j), v in np.ndenumerate(values):
        if not np.isnan(v):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v < 0.6 else "black")
    ax.set_xticks(range(len(BUCKET_LABELS)), [f"{label} px" for label in BUCKET_LABELS])
    ax.set_yticks(range(len(classes)), classes)
    fig.colorbar(image, ax=ax, label="AP50")
    fig.savefig(path, dpi=DPI)


def _pr_plot(data: ReportData, path: Path) -> None:
    fig = _figure()
    ax = fig.add_subplot()
    result = data.summary.result
    if result is not None:
        for c, curve, ap in zip(result.classes, result.pr_curve, result.ap50, strict=True):
            ax.plot(result.px, curve, linewidth=1, label=f"{data.names[c]} {ap:.3f}")
        ax.plot(result.px, result.pr_curve.mean(0), linewidth=3, color="blue", label=f"all {result.ap50.mean():.3f}")
        ax.legend(bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=7)
    else:
        ax.text(0.5, 0.5, "no correct detection", ha="center")
    ax.set(xlabel="Recall", ylabel="Precision", xlim=(0, 1), ylim=(0, 1.01))
    fig.savefig(path, dpi=DPI)


def _score_histogram(data: ReportData, path: Path) -> None:
    fig = _figure()
    ax = fig.add_subplot()
    bins = np.linspace(0, 1, 41)
    ax.hist(data.tp_scores, bins=bins, alpha=0.6, label=f"true positives ({len(data.tp_scores)})", color="#4e9a06")
    ax.hist(data.fp_scores, bins=bins, alpha=0.6, label=f"false positives ({len(data.fp_scores)})", color="#cc0000")
    ax.set(xlabel="score", ylabel="detections", yscale="log")
    ax.legend()
    fig.savefig(path, dpi=DPI)


def _dataset_plot(data: ReportData, path: Path) -> None:
    fig = _figure((9, 3.5))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    per_image = data.dataset.objects_per_image
    left.hist(per_image, bins=min(30, max(1, len(per_image))), color="#75507b")
    left.set(xlabel="objects per image", ylabel="images")
    sides = data.dataset.object_sides
    edges = np.geomspace(1, max(256.0, float(sides.max(initial=1.0)) * 1.1), 40)
    right.hist(np.clip(sides, 1, None), bins=edges, color="#3465a4")
    for low, _ in BUCKETS[1:]:
        right.axvline(low, color="grey", linestyle="--", linewidth=1)
    right.set(xscale="log", xlabel="object side sqrt(w*h), pixels (bucket edges dashed)", ylabel="objects")
    fig.savefig(path, dpi=DPI)


def write_figures(data: ReportData, files_dir: Path) -> dict[str, str]:
    """Write the plots into `files_dir`; returns figure key -> file name."""
    files_dir.mkdir(parents=True, exist_ok=True)
    names = {
        "sizes": "ap_by_size.png",
        "size_classes": "ap_by_size_per_class.png",
        "pr": "pr_curve.png",
        "confusion": "confusion_matrix.png",
        "scores": "score_histogram.png",
        "dataset": "dataset.png",
    }
    _size_plot(data, files_dir / names["sizes"])
    _size_heatmap(data, files_dir / names["size_classes"])
    _pr_plot(data, files_dir / names["pr"])
    plot_confusion_matrix(data.confusion.normalized(), data.names, files_dir / names["confusion"])
    _score_histogram(data, files_dir / names["scores"])
    _dataset_plot(data, files_dir / names["dataset"])
    return names

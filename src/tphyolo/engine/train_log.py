"""Per-epoch training records: results.csv, TensorBoard scalars and the results.png curves."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path


class TrainLog:
    """Appends one row per epoch to `results.csv` (columns fixed by the first row) and mirrors it to TensorBoard.

    Rows already in an existing results.csv are kept, so a resumed run continues the same file.
    """

    def __init__(self, run_dir: Path, *, tensorboard: bool = True) -> None:
        self.csv_path = run_dir / "results.csv"
        self.columns: list[str] | None = None
        if self.csv_path.exists():
            with self.csv_path.open() as f:
                header = f.readline().strip()
            self.columns = [c.strip() for c in header.split(",")] if header else None
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(run_dir))

    def log(self, epoch: int, values: Mapping[str, float]) -> None:
        row = {"epoch": epoch, **values}
        if self.columns is None:
            self.columns = list(row)
            with self.csv_path.open("w", newline="") as f:
                csv.writer(f).writerow(self.columns)
        with self.csv_path.open("a", newline="") as f:
            csv.writer(f).writerow([_fmt(row.get(c, "")) for c in self.columns])
        if self.writer is not None:
            for key, value in values.items():
                self.writer.add_scalar(key, value, epoch)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _fmt(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def read_results(csv_path: Path) -> dict[str, list[float]]:
    """results.csv as columns of floats."""
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    columns: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            columns.setdefault(key.strip(), []).append(float(value))
    return columns


def plot_results(csv_path: Path, out_path: Path | None = None) -> Path:
    """Loss and metric curves from results.csv, one panel per column, written as results.png."""
    from matplotlib.figure import Figure

    columns = read_results(csv_path)
    epochs = columns.pop("epoch", [])
    keys = list(columns)
    ncols = 5
    nrows = max(1, -(-len(keys) // ncols))
    fig = Figure(figsize=(3 * ncols, 2.6 * nrows), tight_layout=True)
    for i, key in enumerate(keys):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        ax.plot(epochs, columns[key], marker=".", linewidth=1.5)
        ax.set_title(key, fontsize=9)
        ax.grid(alpha=0.3)
    out_path = out_path or csv_path.with_name("results.png")
    fig.savefig(out_path, dpi=120)
    return out_path

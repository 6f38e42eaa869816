"""Per-epoch training records: results.csv, TensorBoard scalars and the results.png curves; and the progress bar
of each epoch (`EpochBar`: the running mean losses, the batch's instances and image size, the GPU memory)."""

from __future__ import annotations

import csv
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from tphyolo.data.files.atomic import atomic_path

LOGGER = logging.getLogger("tphyolo.train")


class TrainLog:
    """Appends one row per epoch to `results.csv` (columns fixed by the first row) and mirrors it to TensorBoard.

    The row of an epoch is written before its checkpoint, and `last.pt` is what commits the epoch: rows of
    epochs before `start_epoch` (those a resumed `last.pt` holds) are kept, so a resumed run continues the same
    file; rows from `start_epoch` on (an epoch interrupted before its `last.pt` was written, or an older run in
    a reused folder) and torn rows are dropped, so each epoch has one row.
    """

    def __init__(self, run_dir: Path, *, start_epoch: int = 0, tensorboard: bool = True) -> None:
        self.csv_path = run_dir / "results.csv"
        self.columns: list[str] | None = None
        if self.csv_path.exists():
            self.columns = _keep_rows_before(self.csv_path, start_epoch)
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


def _keep_rows_before(csv_path: Path, start_epoch: int) -> list[str] | None:
    """Rewrites `csv_path` (atomically) with only its complete rows of epochs before `start_epoch`; returns
    its columns, or None when no row is kept (the file is removed then)."""
    with csv_path.open(newline="") as f:
        rows = list(csv.reader(f))
    columns = [c.strip() for c in rows[0]] if rows else []
    kept = [
        row for row in rows[1:] if len(row) == len(columns) and row[0].strip().isdigit() and int(row[0]) < start_epoch
    ]
    dropped = len(rows) - 1 - len(kept) if rows else 0
    if not kept:
        if dropped and start_epoch == 0:
            LOGGER.warning("%s: a new run starts the file again (%d old row(s) dropped)", csv_path, dropped)
        csv_path.unlink()
        return None
    if dropped:
        LOGGER.warning("%s: %d row(s) of epochs after the checkpoint dropped", csv_path, dropped)
        with atomic_path(csv_path) as tmp, tmp.open("w", newline="") as f:
            csv.writer(f).writerows([columns, *kept])
    return columns


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


class EpochBar:
    """A bar of `total` batches for epoch `epoch` of `epochs`; called after each batch with its index, the mean
    loss items (box, obj, cls) so far and the batch; hidden unless `visible`."""

    def __init__(self, total: int, *, epoch: int, epochs: int, device: torch.device, visible: bool) -> None:
        self.device = device
        self.bar = tqdm(total=total, desc=f"epoch {epoch + 1}/{epochs}", leave=False, disable=not visible)

    def __call__(self, i: int, mean_items: torch.Tensor, batch: Any) -> None:
        memory = torch.cuda.memory_reserved(self.device) / 2**30 if self.device.type == "cuda" else 0.0
        box, obj, cls = mean_items.tolist()
        self.bar.set_postfix_str(f"box {box:.4f} obj {obj:.4f} cls {cls:.4f} inst {batch.targets.shape[0]} "
                                 f"img {batch.images.shape[-1]} mem {memory:.2f}G")  # fmt: skip
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()

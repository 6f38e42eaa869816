"""The files of a validation run, as writers that one loop feeds (`tphyolo.evaluation.loop.evaluate`).

A `Writer` is told `reset()` before a run, `process(images)` with each batch's per-image results
(`ImageResult`: detections and ground truth in original pixels) and `write(results)` once the run's evaluators
have given their results (`tphyolo.evaluation.evaluator`: the METRICS EvalResults with the speed, the YOLO
SUMMARY, the CONFUSION matrix, and those of the caller's evaluators, by name). A writer writes from those
results and computes no scores of its own; what `write` returns is among the run's outputs under the writer's
`name`. A new file is one class: pass it in `writers=[...]` to `evaluate` or `val`.

The writers here: `PredictionTxt` (labels/STEM.txt), `PredictionJson` (predictions.json), `BatchPlots`
(val_batchK_labels/pred.jpg), `MetricPlots` (PR/F1/P/R curves, confusion matrices); `writers_for` picks them
from the `ValConfig` flags.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.image_io import read_image, write_image
from tphyolo.evaluation.evaluator import Evaluator
from tphyolo.evaluation.scoring import CONFUSION, METRICS, SUMMARY
from tphyolo.evaluation.settings import ValConfig
from tphyolo.metrics.plots import plot_confusion_matrix, plot_curves, plot_empty_curves
from tphyolo.metrics.protocol import ImageResult
from tphyolo.ops.detections import Detections
from tphyolo.predict.draw import draw_detections, image_grid
from tphyolo.predict.writers import coco_predictions, yolo_lines

PLOTTED_SCORE = 0.25  # batch plots draw detections scoring at least this

_log = logging.getLogger(__name__)


class Writer(Evaluator):
    """Files of a validation run (see the module docstring), its outputs under `name`. It is reset and fed as an
    evaluator is, and gives no results of its own to combine: it writes from the combined ones. Subclasses set
    `name` and override what they need; the defaults write nothing. `uses_confusion`: the run's metrics are to
    build the CONFUSION matrix for it."""

    name = "writer"
    uses_confusion = False

    def write(self, results: Mapping[str, Any]) -> Any:
        """The run's results are in, by name: finish the files; the return value is kept among the outputs."""
        return None


class PredictionTxt(Writer):
    """YOLO txt files with scores, `save_dir/labels/STEM.txt` per image, written as batches come; returns the
    labels folder."""

    name = "labels"

    def __init__(self, save_dir: str | Path) -> None:
        self.folder = Path(save_dir) / "labels"

    def reset(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    def process(self, images: Sequence[ImageResult]) -> None:
        for r in images:
            detections = Detections.from_rows(r.detections)
            lines = yolo_lines(detections, width=r.shape[1], height=r.shape[0], with_score=True)
            (self.folder / f"{Path(r.path).stem}.txt").write_text("".join(f"{line}\n" for line in lines))

    def write(self, results: Mapping[str, Any]) -> Path:
        return self.folder


class PredictionJson(Writer):
    """`save_dir/predictions.json`: COCO results (image ids by `tphyolo.metrics.coco.coco_image_ids`, as the
    COCO protocol numbers the ground truth); returns its path."""

    name = "predictions_json"

    def __init__(self, save_dir: str | Path) -> None:
        self.path = Path(save_dir) / "predictions.json"
        self.named: list[tuple[str, Detections]] = []

    def reset(self) -> None:
        self.named = []

    def process(self, images: Sequence[ImageResult]) -> None:
        self.named += [(Path(r.path).stem, Detections.from_rows(r.detections)) for r in images]

    def write(self, results: Mapping[str, Any]) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path, json.dumps(coco_predictions(self.named)))
        return self.path


class BatchPlots(Writer):
    """`val_batchK_labels.jpg` and `val_batchK_pred.jpg` in `save_dir`: the first `batches` groups of 16 images,
    ground truth vs detections scoring at least PLOTTED_SCORE; returns the files written."""

    name = "batch_plots"

    def __init__(self, save_dir: str | Path, *, batches: int = 3) -> None:
        self.save_dir, self.batches = Path(save_dir), batches
        self.images: list[ImageResult] = []

    def reset(self) -> None:
        self.images = []

    def process(self, images: Sequence[ImageResult]) -> None:
        self.images += list(images)[: 16 * self.batches - len(self.images)]

    def write(self, results: Mapping[str, Any]) -> list[Path]:
        names, written = list(results[METRICS].names), []
        self.save_dir.mkdir(parents=True, exist_ok=True)
        for k in range(self.batches):
            group = self.images[16 * k : 16 * (k + 1)]
            if not group:
                break
            labels, preds = [], []
            for r in group:
                image = read_image(r.path)
                truth = Detections(r.boxes, torch.ones(len(r.classes)), r.classes)
                labels.append(draw_detections(image, truth, names, scores=False))
                detections = Detections.from_rows(r.detections[r.detections[:, 4] >= PLOTTED_SCORE])
                preds.append(draw_detections(image, detections, names))
            for kind, drawn in (("labels", labels), ("pred", preds)):
                written.append(self.save_dir / f"val_batch{k}_{kind}.jpg")
                write_image(written[-1], image_grid(drawn))
        return written


class MetricPlots(Writer):
    """PR/F1/P/R curves and the confusion matrix (YOLO matching) as counts and normalised, as PNG files in
    `save_dir` (confusion_matrix.png, confusion_matrix_normalized.png), drawn from the run's SUMMARY and CONFUSION
    results; returns the files written. A run with no correct detection gets flat curves that say why (and a
    logged warning); `conf`: the run's confidence threshold, for that reason."""

    name = "metric_plots"
    uses_confusion = True

    def __init__(self, save_dir: str | Path, *, conf: float | None = None) -> None:
        self.save_dir, self.conf = Path(save_dir), conf
        self.detections = 0

    def reset(self) -> None:
        self.detections = 0

    def process(self, images: Sequence[ImageResult]) -> None:
        self.detections += sum(len(r.detections) for r in images)

    def write(self, results: Mapping[str, Any]) -> list[Path]:
        metrics, summary = results[METRICS], results[SUMMARY]
        names = list(metrics.names)
        self.save_dir.mkdir(parents=True, exist_ok=True)
        if summary.result is not None:
            written = plot_curves(summary.result, names, self.save_dir)
        else:
            reason = self._no_curves(images=metrics.images, labels=metrics.instances)
            _log.warning("PR/F1/P/R curves in %s are flat: %s", self.save_dir, reason)
            written = plot_empty_curves(reason, self.save_dir)
        confusion = results[CONFUSION]
        written.append(plot_confusion_matrix(confusion.matrix, names, self.save_dir / "confusion_matrix.png",
                                             counts=True))  # fmt: skip
        written.append(plot_confusion_matrix(confusion.normalized(), names,
                                             self.save_dir / "confusion_matrix_normalized.png"))  # fmt: skip
        return written

    def _no_curves(self, *, images: int, labels: int) -> str:
        """Why a run has no curves: no labels, no detections, or no detection on a labelled object."""
        above = f" above conf {self.conf:g}" if self.conf is not None else ""
        scored = f"{images} image{'s' if images != 1 else ''}"
        if not labels:
            return f"no labelled objects in the {scored} scored ({self.detections} detections{above})"
        if not self.detections:
            return f"no detections{above} in the {scored} scored ({labels} labelled objects)"
        return (f"none of the {self.detections} detections{above} found a labelled object of its class at IoU 0.5 "
                f"({labels} objects in {scored})")  # fmt: skip


def writers_for(config: ValConfig, save_dir: str | Path, *, conf: float | None = None) -> list[Writer]:
    """The writers the flags of `config` ask for (`save_txt`, `save_json`, `plots`), writing into `save_dir`;
    `conf`: the run's confidence threshold (the plots say it when nothing scored above it)."""
    writers: list[Writer] = []
    if config.save_txt:
        writers.append(PredictionTxt(save_dir))
    if config.save_json:
        writers.append(PredictionJson(save_dir))
    if config.plots:
        writers += [BatchPlots(save_dir), MetricPlots(save_dir, conf=conf)]
    return writers

"""The outputs of a validation run, as evaluators that one loop feeds (`tphyolo.evaluation.loop.evaluate`).

An `Evaluator` is told `reset()` before a run, `process(images)` with each batch's per-image results
(`ImageResult`: detections and ground truth in original pixels) and `evaluate(results)` once the run is scored
(`EvalResults`: the numbers, names, speed); what `evaluate` returns is in `EvalResults.outputs`, in the order the
evaluators were given. A new output is one class: pass it in `evaluators=[...]` to `evaluate` or `val`.

The writers here: `PredictionTxt` (labels/STEM.txt), `PredictionJson` (predictions.json), `BatchPlots`
(val_batchK_labels/pred.jpg), `MetricPlots` (PR/F1/P/R curves, confusion matrix); `writers_for` picks them from
the `ValConfig` flags.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.image_io import read_image, write_image
from tphyolo.evaluation.settings import ValConfig
from tphyolo.metrics.confusion import ConfusionMatrix
from tphyolo.metrics.plots import plot_confusion_matrix, plot_curves
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.yolo import summarize
from tphyolo.ops.detections import Detections
from tphyolo.predict.draw import draw_detections, image_grid
from tphyolo.predict.writers import coco_predictions, yolo_lines

if TYPE_CHECKING:  # the loop's result type; the loop imports this module
    from tphyolo.evaluation.loop import EvalResults

PLOTTED_SCORE = 0.25  # batch plots draw detections scoring at least this


class Evaluator:
    """One output of a validation run (see the module docstring). Subclasses override what they need; the
    defaults do nothing and return None. Only the process that scores the run (rank 0) feeds its evaluators,
    with every batch of the run in order."""

    def reset(self) -> None:
        """Before a run: forget what an earlier run gave."""

    def process(self, images: Sequence[ImageResult]) -> None:
        """One batch's per-image results, in original pixels."""

    def evaluate(self, results: EvalResults) -> Any:
        """The run's scores are in: finish the output; the return value is kept in `results.outputs`."""
        return None


class PredictionTxt(Evaluator):
    """YOLO txt files with scores, `save_dir/labels/STEM.txt` per image, written as batches come; returns the
    labels folder."""

    def __init__(self, save_dir: str | Path) -> None:
        self.folder = Path(save_dir) / "labels"

    def reset(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    def process(self, images: Sequence[ImageResult]) -> None:
        for r in images:
            detections = Detections.from_rows(r.detections)
            lines = yolo_lines(detections, width=r.shape[1], height=r.shape[0], with_score=True)
            (self.folder / f"{Path(r.path).stem}.txt").write_text("".join(f"{line}\n" for line in lines))

    def evaluate(self, results: EvalResults) -> Path:
        return self.folder


class PredictionJson(Evaluator):
    """`save_dir/predictions.json`: COCO results (image ids by `tphyolo.metrics.coco.coco_image_ids`, as the
    COCO protocol numbers the ground truth); returns its path."""

    def __init__(self, save_dir: str | Path) -> None:
        self.path = Path(save_dir) / "predictions.json"
        self.named: list[tuple[str, Detections]] = []

    def reset(self) -> None:
        self.named = []

    def process(self, images: Sequence[ImageResult]) -> None:
        self.named += [(Path(r.path).stem, Detections.from_rows(r.detections)) for r in images]

    def evaluate(self, results: EvalResults) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path, json.dumps(coco_predictions(self.named)))
        return self.path


class BatchPlots(Evaluator):
    """`val_batchK_labels.jpg` and `val_batchK_pred.jpg` in `save_dir`: the first `batches` groups of 16 images,
    ground truth vs detections scoring at least PLOTTED_SCORE; returns the files written."""

    def __init__(self, save_dir: str | Path, *, batches: int = 3) -> None:
        self.save_dir, self.batches = Path(save_dir), batches
        self.images: list[ImageResult] = []

    def reset(self) -> None:
        self.images = []

    def process(self, images: Sequence[ImageResult]) -> None:
        self.images += list(images)[: 16 * self.batches - len(self.images)]

    def evaluate(self, results: EvalResults) -> list[Path]:
        names, written = list(results.names), []
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


class MetricPlots(Evaluator):
    """PR/F1/P/R curves (when any detection was correct) and the normalised confusion matrix (YOLO matching),
    as PNG files in `save_dir`; returns the ConfusionMatrix."""

    def __init__(self, save_dir: str | Path) -> None:
        self.save_dir = Path(save_dir)
        self.images: list[ImageResult] = []

    def reset(self) -> None:
        self.images = []

    def process(self, images: Sequence[ImageResult]) -> None:
        self.images += list(images)

    def evaluate(self, results: EvalResults) -> ConfusionMatrix:
        names = list(results.names)
        confusion = ConfusionMatrix(len(names))
        summary = summarize(self.images, nc=len(names), confusion=confusion)
        self.save_dir.mkdir(parents=True, exist_ok=True)
        if summary.result is not None:
            plot_curves(summary.result, names, self.save_dir)
        plot_confusion_matrix(confusion.normalized(), names, self.save_dir / "confusion_matrix.png")
        return confusion


def writers_for(config: ValConfig, save_dir: str | Path) -> list[Evaluator]:
    """The writers the flags of `config` ask for (`save_txt`, `save_json`, `plots`), writing into `save_dir`."""
    writers: list[Evaluator] = []
    if config.save_txt:
        writers.append(PredictionTxt(save_dir))
    if config.save_json:
        writers.append(PredictionJson(save_dir))
    if config.plots:
        writers += [BatchPlots(save_dir), MetricPlots(save_dir)]
    return writers

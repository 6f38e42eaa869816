"""Choosing a crop classifier's default weight w: a small sweep on the val split with the detector it serves.

The detector and classifier are built as `tphyolo val --classifier` builds them (`build_detector`); the detector
runs once over the split (validation thresholds, without the classifier); the detections of the
classifier's classes are classified once (`relabel.classify_rows`, as `Detector.reclassify` does); then each
weight of `SWEEP_WEIGHTS` re-labels them (`relabel.relabel_rows`) and the run is scored by YOLO mAP50 (ties:
mAP50-95, then the smaller weight). `tphyolo classify train --detector` runs it and saves the best weight in
the classifier's checkpoints, where `--classifier` finds it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from tphyolo.classify.checkpoint import load_classifier, save_classifier
from tphyolo.classify.classifier import CropClassifier
from tphyolo.classify.relabel import classify_rows, relabel_rows
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.loader import DatasetSettings, LoaderSettings, build_dataloader, build_dataset
from tphyolo.evaluation.loop import collect_results
from tphyolo.infer.build import build_detector
from tphyolo.infer.config import RECLASSIFY_MIN_SCORE, VALIDATION, inference_config
from tphyolo.infer.spec import DetectorSpec
from tphyolo.metrics.yolo import summarize
from tphyolo.runtime.config import RuntimeConfig

SWEEP_WEIGHTS = (0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@dataclass(frozen=True)
class WeightSweep:
    """YOLO mAP50 and mAP50-95 on the val split for each weight tried; `best` is the chosen weight."""

    map50: dict[float, float]
    map: dict[float, float]
    best: float

    def table(self) -> str:
        lines = [f"{'weight':>8}{'mAP50':>10}{'mAP50-95':>10}"]
        for w in self.map50:
            mark = "  <- chosen" if w == self.best else ""
            lines.append(f"{w:>8.2f}{self.map50[w]:>10.4f}{self.map[w]:>10.4f}{mark}")
        return "\n".join(lines)


def sweep_weight(
    classifier: str | Path | CropClassifier,
    detector: str | Path,
    data: str | Path,
    *,
    runtime: RuntimeConfig,
    imgsz: int,
    batch: int = 8,
    workers: int = 0,
    weights: tuple[float, ...] = SWEEP_WEIGHTS,
) -> WeightSweep:
    """Try each of `weights` for `classifier` (a file or a CropClassifier) with the detector checkpoint (or exported
    model) `detector` at `imgsz` on the val split of `data` (module docstring)."""
    spec = DetectorSpec(detector, inference=inference_config(VALIDATION, imgsz=imgsz, batch=batch), runtime=runtime,
                        classifier=classifier)  # fmt: skip
    built = build_detector(spec)  # the image size a stride multiple; the classifier's classes checked
    (backend,), crop_classifier, size = built.detector.backends, built.detector.classifier, built.config.imgsz
    dataset_config = load_data_config(data)
    dataset, _ = build_dataset(
        dataset_config, "val", DatasetSettings(imgsz=size, rect=True, batch_size=batch, stride=backend.stride)
    )
    loader = build_dataloader(dataset, LoaderSettings(batch_size=batch, workers=workers))
    results, _ = collect_results(backend, loader, config=built.config)  # without the classifier: rows to relabel
    rows = [r.detections for r in results]
    classified = classify_rows(crop_classifier, rows, [r.path for r in results], min_score=RECLASSIFY_MIN_SCORE)
    map50, mean_ap = {}, {}
    for w in weights:
        relabelled = relabel_rows(rows, classified, weight=w)
        summary = summarize(
            [dataclasses.replace(r, detections=d) for r, d in zip(results, relabelled, strict=True)],
            nc=len(backend.names),
        )
        map50[w], mean_ap[w] = summary.map50, summary.map
    best = max(weights, key=lambda w: (map50[w], mean_ap[w], -w))
    return WeightSweep(map50, mean_ap, best)


def save_weight(path: str | Path, weight: float) -> Path:
    """Rewrite the classifier file `path` with `weight` as its default weight."""
    return save_classifier(path, dataclasses.replace(load_classifier(path), weight=weight))

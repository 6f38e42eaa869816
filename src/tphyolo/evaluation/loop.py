"""The validation loop: run a model over a loader of `Batch`es and score its detections.

Detections and ground truth are compared in original-image pixels: the inference core
(`tphyolo.infer.detector.Detector`) maps detections back from the letterboxed batch with each image's ratio
and padding, and the targets and ignore regions are mapped likewise. A protocol of the registry
(`tphyolo.metrics.registry.PROTOCOLS`: "yolo", "coco", "visdrone") scores them; the YOLO numbers (P, R, the
per-class table) are reported with every protocol. With a crop classifier, each batch's merged detections are
re-labelled from the original images (`Detector.reclassify`) before they are scored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from torch import nn

from tphyolo.classify.checkpoint import load_classifier
from tphyolo.classify.classifier import CropClassifier, as_classifier
from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.image_io import read_image
from tphyolo.evaluation.sharded import Shard, gather_in_order, gather_speed, global_progress
from tphyolo.infer.backends.pytorch import Backend, as_backend
from tphyolo.infer.config import VALIDATION, InferenceConfig
from tphyolo.infer.detector import Detector, PhaseTimes, View, ViewBatch
from tphyolo.infer.slicing import SliceConfig
from tphyolo.infer.windows import image_windows, view_batches
from tphyolo.metrics.ap import Summary, fitness
from tphyolo.metrics.confusion import ConfusionMatrix
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.registry import get_protocol
from tphyolo.metrics.yolo import summarize, summary_result
from tphyolo.ops import cxcywh_to_xyxy
from tphyolo.ops.detections import Detections
from tphyolo.predict.writers import coco_predictions, yolo_lines
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.distributed import broadcast_object


@dataclass(frozen=True)
class ClassResult:
    """YOLO metrics of one class with objects: images holding it, objects, P, R, AP50, AP50-95."""

    name: str
    images: int
    instances: int
    precision: float
    recall: float
    map50: float
    map: float


@dataclass(frozen=True)
class EvalResults:
    """Scores of one validation run.

    mp, mr: mean precision and recall over classes with objects, at the confidence of best mean F1 (YOLO
    matching, for every protocol); map50, map: mean AP at IoU 0.5 and over 0.50:0.95 (fractions) by the
    run's protocol; per_class: YOLO metrics per class; extra: the protocol's headline numbers in percent
    (e.g. "AP", "AR500"); tables: the YOLO table, then the protocol's when it is not YOLO; speed: ms per
    image for "preprocess", "inference", "mapping" (and "classify" with a crop classifier); protocol_per_class:
    the protocol's per-class numbers in percent (as `extra`); classifier_classes: the crop classifier's
    classes, empty without one; image_results: each image's detections and ground truth, when asked for;
    names: the class names scored (index = class id).
    """

    protocol: str
    mp: float
    mr: float
    map50: float
    map: float
    per_class: list[ClassResult]
    images: int
    instances: int
    speed: dict[str, float]
    tables: tuple[str, ...] = ()
    extra: dict[str, float] = field(default_factory=dict)
    save_dir: Path | None = None
    protocol_per_class: dict[str, dict[str, float]] = field(default_factory=dict)
    classifier_classes: tuple[str, ...] = ()
    image_results: tuple[ImageResult, ...] = ()
    names: tuple[str, ...] = ()

    @property
    def fitness(self) -> float:
        """The checkpoint-selection score (`tphyolo.metrics.fitness`)."""
        return fitness(self.map50, self.map)


def _ground_truth(batch, i: int, view: View) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Image i's classes (m,) int64, boxes (m, 4) and ignore regions (k, 4), xyxy in original pixels."""
    rows = batch.targets[batch.targets[:, 0] == i].float().cpu()
    _, _, bh, bw = batch.images.shape
    boxes = cxcywh_to_xyxy(rows[:, 2:6] * torch.tensor([bw, bh, bw, bh], dtype=torch.float32))
    return rows[:, 1].long(), view.unletterbox(boxes), view.unletterbox(batch.ignore[i].reshape(-1, 4))


def collect_results(
    model: nn.Module | Backend,
    loader: Iterable,
    *,
    config: InferenceConfig = VALIDATION,
    runtime: RuntimeConfig | None = None,
    device: torch.device | None = None,
    progress: bool = False,
    classifier: str | Path | CropClassifier | None = None,
    classifier_weight: float | None = None,
    slicing: SliceConfig | None = None,
    imgsz: int | None = None,
) -> tuple[list[ImageResult], dict[str, float]]:
    """Run `model` (a backend, or a module already prepared on `device`, run in eval mode) over `loader`;
    returns per-image results in original pixels and the time per image in ms for "preprocess", "inference"
    (forward passes and NMS) and "mapping" (back to original pixels, merged), and "classify" with a crop `classifier`
    (a checkpoint or a CropClassifier; `classifier_weight` replaces its share) that re-labels the detections
    of its classes. `config.imgsz` and `config.batch` are the loader's business and not used here -- except with
    `slicing`: then each original image is read from its path again, cut into windows that are letterboxed to
    `imgsz` (default `config.imgsz`) and run `config.batch` at a time, their detections merged by `config.merge`
    on the full image, and scored against the full image's ground truth."""
    results, seconds = [], {"preprocess": 0.0, "inference": 0.0, "mapping": 0.0}
    if classifier is not None:
        seconds["classify"] = 0.0
    if progress:
        from tqdm import tqdm

        loader = tqdm(loader, desc="val", unit="batch", leave=False)  # the results table follows
    with as_backend(model, runtime=runtime, device=device) as backend:
        if classifier is not None:
            classifier = as_classifier(classifier, detector_names=backend.names, device=backend.device,
                                       runtime=runtime, weight=classifier_weight)  # fmt: skip
        detector = Detector([backend], config, classifier=classifier)
        times = PhaseTimes(detector.device)
        for batch in loader:
            with times.phase("preprocess"):
                x = detector.prepare(batch.images)  # (B, 3, H, W)
            sizes = [tuple(shape.tolist()) for shape in batch.shapes0]  # (height, width)
            views = [View(ratio.tolist(), pad.tolist(), w, h) for ratio, pad, (h, w) in
                     zip(batch.ratios, batch.pads, sizes, strict=True)]  # fmt: skip
            ids = range(len(views))
            paths = [str(p) for p in batch.paths]
            if slicing is None:
                rows = detector([ViewBatch(x, views, ids)], owners=ids, sizes=sizes, images=paths, times=times)
            else:
                rows = _sliced_rows(detector, paths, sizes, slicing=slicing, times=times,
                                    imgsz=imgsz or config.imgsz)  # fmt: skip
            for i, (view, merged) in enumerate(zip(views, rows, strict=True)):
                classes, boxes, ignore = _ground_truth(batch, i, view)
                results.append(ImageResult(str(batch.paths[i]), (view.height, view.width), merged, classes, boxes,
                                           ignore))  # fmt: skip
    for phase, spent in times.items():
        seconds[phase] += spent
    n = max(len(results), 1)
    return results, {k: 1000.0 * v / n for k, v in seconds.items()}


def _sliced_rows(detector: Detector, paths: Sequence[str], sizes, *, slicing: SliceConfig, imgsz: int, times):
    """The merged detections of the original images at `paths` (of `sizes` (h, w)) predicted window by window."""
    with times.phase("preprocess"):
        images = [read_image(path) for path in paths]
    for path, image, size in zip(paths, images, sizes, strict=True):
        if tuple(image.shape[:2]) != tuple(size):
            raise ValueError(f"{path}: read as {image.shape[1]}x{image.shape[0]}, but the loader had it as "
                             f"{size[1]}x{size[0]}")  # fmt: skip
    slicing = slicing.resolved(imgsz)
    windows = image_windows(images, slicing)
    batches = view_batches(images, windows, detector=detector, imgsz=imgsz, batch=detector.config.batch)
    return detector(batches, owners=[w.owner for w in windows], sizes=sizes, images=images, times=times)


def save_predictions(results: Sequence[ImageResult], save_dir: Path, *, save_txt: bool, save_json: bool) -> None:
    """YOLO txt files (`labels/STEM.txt`, with scores) and/or `predictions.json` (COCO results; image ids by
    `tphyolo.metrics.coco.coco_image_ids`, as the COCO protocol numbers the ground truth)."""
    named = [(Path(r.path).stem, Detections.from_rows(r.detections)) for r in results]
    for r, (stem, detections) in zip(results, named, strict=True):
        if save_txt:
            (save_dir / "labels").mkdir(parents=True, exist_ok=True)
            lines = yolo_lines(detections, width=r.shape[1], height=r.shape[0], with_score=True)
            (save_dir / "labels" / f"{stem}.txt").write_text("".join(f"{line}\n" for line in lines))
    if save_json:
        write_text_atomic(save_dir / "predictions.json", json.dumps(coco_predictions(named)))


def save_batch_plots(results: Sequence[ImageResult], save_dir: Path, *, names: list[str], batches: int = 3) -> None:
    """`val_batchK_labels.jpg` and `val_batchK_pred.jpg`: up to 16 images each, ground truth vs detections
    (detections scoring at least 0.25)."""
    from tphyolo.data.files.image_io import read_image, write_image
    from tphyolo.predict.draw import draw_detections, image_grid

    for k in range(batches):
        group = results[16 * k : 16 * (k + 1)]
        if not group:
            break
        labels, preds = [], []
        for r in group:
            image = read_image(r.path)
            truth = Detections(r.boxes, torch.ones(len(r.classes)), r.classes)
            labels.append(draw_detections(image, truth, names, scores=False))
            detections = Detections.from_rows(r.detections[r.detections[:, 4] >= 0.25])
            preds.append(draw_detections(image, detections, names))
        write_image(save_dir / f"val_batch{k}_labels.jpg", image_grid(labels))
        write_image(save_dir / f"val_batch{k}_pred.jpg", image_grid(preds))


def save_metric_plots(summary, confusion, save_dir: Path, *, names: list[str]) -> None:
    """PR/F1/P/R curves (when any detection was correct) and the normalised confusion matrix, as PNG files."""
    from tphyolo.metrics.plots import plot_confusion_matrix, plot_curves

    if summary.result is not None:
        plot_curves(summary.result, names, save_dir)
    plot_confusion_matrix(confusion.normalized(), names, save_dir / "confusion_matrix.png")


def _per_class(summary, results: Sequence[ImageResult], names: Sequence[str]) -> list[ClassResult]:
    if summary.result is None:
        return []
    res = summary.result
    holding = torch.zeros(len(names), dtype=torch.int64)
    for r in results:
        holding[r.classes.unique()] += 1
    return [
        ClassResult(
            str(names[c]),
            int(holding[c]),
            int(summary.labels_per_class[c]),
            float(res.p[i]),
            float(res.r[i]),
            float(res.ap50[i]),
            float(res.ap50_95[i]),
        )
        for i, c in enumerate(res.classes.tolist())
    ]


def evaluate(
    model: nn.Module | Backend,
    loader: Iterable,
    *,
    names: Sequence[str],
    config: InferenceConfig = VALIDATION,
    runtime: RuntimeConfig | None = None,
    device: torch.device | None = None,
    protocol: str = "yolo",
    save_dir: Path | None = None,
    save_json: bool = False,
    save_txt: bool = False,
    plots: bool = False,
    progress: bool = False,
    classifier: str | Path | CropClassifier | None = None,
    classifier_weight: float | None = None,
    keep_images: bool = False,
    shard: Shard | None = None,
    slicing: SliceConfig | None = None,
    imgsz: int | None = None,
) -> EvalResults:
    """Validate `model` on `loader`'s `Batch`es with `config` (thresholds, TTA, merging) and score the run
    by `protocol` (a name of `tphyolo.metrics.registry.PROTOCOLS`).

    `model` is a backend, or a module already prepared by `runtime` on `device` (fp16 weights with
    `runtime.half`, which then runs without autocast), put in eval mode for the run and given back in its
    previous mode. With `save_dir`: `save_txt` (labels/), `save_json` (predictions.json) and `plots` (val
    batch images, PR/F1/P/R curves, confusion matrix). classifier, classifier_weight: a crop classifier that
    re-labels the detections of its classes first (`collect_results`). keep_images: the per-image results
    are kept in `image_results` (for `tphyolo.report`). slicing, imgsz: sliced predictions on the full images
    (`collect_results`).

    shard: in a distributed run, which images `loader` holds (`evaluation.sharded`): every rank calls this,
    rank 0 gathers the per-image results, scores and saves, and every rank returns its scores (the per-image
    results only on rank 0).
    """
    get_protocol(protocol)  # an unknown name fails before the run
    saves = shard is None or shard.ctx.is_main
    if (save_json or save_txt or plots) and save_dir is None and saves:
        raise ValueError("save_json, save_txt and plots need a save_dir")
    classifier_classes: tuple[str, ...] = ()
    if isinstance(classifier, CropClassifier):
        classifier_classes = classifier.names
    elif classifier is not None:
        classifier_classes = load_classifier(classifier).names
    distributed = shard is not None and shard.ctx.distributed
    batches = global_progress(loader, shard, desc="val", enabled=progress) if distributed else loader
    results, speed = collect_results(model, batches, config=config, runtime=runtime, device=device,
                                     progress=progress and not distributed, classifier=classifier,
                                     classifier_weight=classifier_weight, slicing=slicing,
                                     imgsz=imgsz)  # fmt: skip
    if distributed:
        speed = gather_speed(shard, speed, len(results))
        results = gather_in_order(shard, results)
        if results is None:  # rank 0 scores
            return broadcast_object(shard.ctx, None)

    confusion = ConfusionMatrix(len(names)) if plots else None
    scored, summary = score_images(results, names=names, protocol=protocol, max_det=config.max_det, speed=speed,
                                   confusion=confusion, classifier_classes=classifier_classes)  # fmt: skip
    if save_dir is not None:
        save_dir = Path(save_dir)
        save_dir.mkdir(parents=True, exist_ok=True)
        save_predictions(results, save_dir, save_txt=save_txt, save_json=save_json)
        if plots:
            save_batch_plots(results, save_dir, names=list(names))
            save_metric_plots(summary, confusion, save_dir, names=list(names))
    if distributed:
        broadcast_object(shard.ctx, scored)
    return replace(scored, save_dir=save_dir, image_results=tuple(results) if keep_images else ())


def score_images(
    images: Sequence[ImageResult],
    *,
    names: Sequence[str],
    protocol: str = "yolo",
    max_det: int = VALIDATION.max_det,
    speed: dict[str, float] | None = None,
    confusion: ConfusionMatrix | None = None,
    classifier_classes: Sequence[str] = (),
) -> tuple[EvalResults, Summary]:
    """Score per-image results by `protocol` (YOLO numbers always, the protocol's beside them); fills
    `confusion` when given. Returns the EvalResults (`speed` as given, default empty) and the YOLO Summary
    (per-class curves) they were read from."""
    scorer = get_protocol(protocol)
    summary = summarize(images, nc=len(names), confusion=confusion)
    yolo = summary_result(summary, names)
    scored = yolo if protocol == "yolo" else scorer.score(images, names=names, max_det=max_det)
    results = EvalResults(
        protocol=protocol,
        mp=summary.mp,
        mr=summary.mr,
        map50=scored.map50,
        map=scored.map,
        per_class=_per_class(summary, images, names),
        images=len(images),
        instances=int(summary.labels_per_class.sum()),
        speed=dict(speed or {}),
        tables=(yolo.table,) if scored is yolo else (yolo.table, scored.table),
        extra=dict(scored.overall),
        protocol_per_class=dict(scored.per_class),
        classifier_classes=tuple(classifier_classes),
        names=tuple(map(str, names)),
    )
    return results, summary


PER_CLASS_ROWS_BELOW = 50  # with fewer classes than this, tables list every class by default


def format_results(results: EvalResults, *, verbose: bool | None = None) -> str:
    """The YOLO table, the protocol's table, and the speed. The YOLO table has a row per class when `verbose`,
    or by default (None) when 2 to PER_CLASS_ROWS_BELOW - 1 classes have rows; else the 'all' row alone."""
    yolo = results.tables[0].splitlines() if results.tables else []
    if verbose is None:
        verbose = 1 < len(results.per_class) < PER_CLASS_ROWS_BELOW
    lines = yolo if verbose else yolo[:2]
    for table in results.tables[1:]:
        lines += ["", f"{results.protocol} protocol (percent):", table]
    speed = results.speed
    classify = f", {speed['classify']:.1f} ms crop classifier" if "classify" in speed else ""
    lines.append(
        f"Speed: {speed['preprocess']:.1f} ms pre-process, {speed['inference']:.1f} ms inference and NMS, "
        f"{speed['mapping']:.1f} ms mapping back and merging{classify} per image"
    )
    return "\n".join(lines)


def results_json(results: EvalResults) -> dict:
    """The numbers of a run as plain data, for comparing runs by script:

    {"protocol": name, "metrics": {"P", "R", "mAP50", "mAP50-95"} | the protocol's headline numbers,
     "per_class": {class: {"images", "instances", "P", "R", "AP50", "AP50-95"} | the protocol's numbers},
     "classifier_classes": [...] (only with a crop classifier)}

    P, R, mAP50 and mAP50-95 are fractions, as the YOLO table prints them (mAP by the run's protocol, as
    `val` reports it; per class by YOLO matching). With the "coco" or "visdrone" protocol, the numbers of its
    table are added as "PROTOCOL/NAME" with NAME as that table prints it (AP, AP50, AP75, AR1, ...), in
    percent as printed.
    """
    metrics = {"P": results.mp, "R": results.mr, "mAP50": results.map50, "mAP50-95": results.map}
    per_class = {
        c.name: {
            "images": c.images,
            "instances": c.instances,
            "P": c.precision,
            "R": c.recall,
            "AP50": c.map50,
            "AP50-95": c.map,
        }
        for c in results.per_class
    }
    if results.protocol != "yolo":
        metrics |= {f"{results.protocol}/{k}": v for k, v in results.extra.items()}
        for name, values in results.protocol_per_class.items():
            per_class.setdefault(name, {}).update({f"{results.protocol}/{k}": v for k, v in values.items()})
    out = {"protocol": results.protocol, "metrics": metrics, "per_class": per_class}
    if results.classifier_classes:
        out["classifier_classes"] = list(results.classifier_classes)
    return out

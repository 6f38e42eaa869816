"""The validation loop: run a model over a loader of `Batch`es and score its detections.

Detections and ground truth are compared in original-image pixels: the inference core
(`tphyolo.infer.detector.Detector`) maps detections back from the letterboxed batch with each image's ratio
and padding, and the targets and ignore regions are mapped likewise. A protocol of the registry
(`tphyolo.metrics.registry.PROTOCOLS`: "yolo", "coco", "visdrone") scores them; the YOLO numbers (P, R, the
per-class table) are reported with every protocol. With a crop classifier, each batch's merged detections are
re-labelled from the original images (`Detector.reclassify`) before they are scored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from tphyolo.classify.checkpoint import load_classifier
from tphyolo.classify.classifier import CropClassifier, as_classifier
from tphyolo.data.files.image_io import read_image
from tphyolo.errors import InputError
from tphyolo.evaluation.settings import DEFAULT_EVAL, EvalSettings
from tphyolo.evaluation.sharded import gather_in_order, gather_speed, global_progress
from tphyolo.evaluation.writers import Evaluator
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
    names: the class names scored (index = class id); outputs: what the run's evaluators returned, in their
    order (`tphyolo.evaluation.writers`).
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
    outputs: tuple[Any, ...] = ()

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
    settings: EvalSettings = DEFAULT_EVAL,
    runtime: RuntimeConfig | None = None,
    device: torch.device | None = None,
    on_batch: Callable[[list[ImageResult]], None] | None = None,
) -> tuple[list[ImageResult], dict[str, float]]:
    """Run `model` (a backend, or a module already prepared on `device`, run in eval mode) over `loader`;
    returns per-image results in original pixels (each batch's also given to `on_batch` as it comes) and the
    time per image in ms for "preprocess", "inference" (forward passes and NMS) and "mapping" (back to
    original pixels, merged), and "classify" with a crop `settings.classifier` that re-labels the detections
    of its classes.
    `config.imgsz` and `config.batch` are the loader's business and not used here -- except with
    `settings.slicing`: then each original image is read from its path again, cut into windows that are
    letterboxed to `config.imgsz` and run `config.batch` at a time, their detections merged by `config.merge`
    on the full image, and scored against the full image's ground truth. `settings.progress`: a progress bar."""
    results, seconds = [], {"preprocess": 0.0, "inference": 0.0, "mapping": 0.0}
    classifier, slicing = settings.classifier, settings.slicing
    if classifier is not None:
        seconds["classify"] = 0.0
    if settings.progress:
        loader = tqdm(loader, desc="val", unit="batch", leave=False)  # the results table follows
    with as_backend(model, runtime=runtime, device=device) as backend:
        if classifier is not None:
            classifier = as_classifier(classifier, detector_names=backend.names, device=backend.device,
                                       runtime=runtime, weight=settings.classifier_weight)  # fmt: skip
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
                rows = _sliced_rows(detector, paths, sizes, slicing=slicing, times=times, imgsz=config.imgsz)
            batch_results = []
            for i, (view, merged) in enumerate(zip(views, rows, strict=True)):
                classes, boxes, ignore = _ground_truth(batch, i, view)
                batch_results.append(ImageResult(str(batch.paths[i]), (view.height, view.width), merged, classes,
                                                 boxes, ignore))  # fmt: skip
            results += batch_results
            if on_batch is not None:
                on_batch(batch_results)
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
            raise InputError(f"{path}: read as {image.shape[1]}x{image.shape[0]}, but the loader had it as "
                             f"{size[1]}x{size[0]}")  # fmt: skip
    slicing = slicing.resolved(imgsz)
    windows = image_windows(images, slicing)
    batches = view_batches(images, windows, detector=detector, imgsz=imgsz, batch=detector.config.batch)
    return detector(batches, owners=[w.owner for w in windows], sizes=sizes, images=images, times=times)


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
    settings: EvalSettings = DEFAULT_EVAL,
    evaluators: Sequence[Evaluator] = (),
    runtime: RuntimeConfig | None = None,
    device: torch.device | None = None,
) -> EvalResults:
    """Validate `model` on `loader`'s `Batch`es with `config` (thresholds, TTA, merging) and score the run as
    `settings` say (protocol, crop classifier, slicing: see `EvalSettings` and `collect_results`).

    `model` is a backend, or a module already prepared by `runtime` on `device` (fp16 weights with
    `runtime.half`, which then runs without autocast), put in eval mode for the run and given back in its
    previous mode. `evaluators` (`tphyolo.evaluation.writers`: the files a run writes, or any output of one's
    own) are reset, given every batch's per-image results and then the scores; what they return is in
    `outputs`, in their order.

    settings.shard: in a distributed run, which images `loader` holds (`evaluation.sharded`): every rank calls
    this, rank 0 gathers the per-image results, feeds its evaluators, scores, and every rank returns its
    scores (the per-image results and outputs only on rank 0).
    """
    get_protocol(settings.protocol)  # an unknown name fails before the run
    classifier, shard = settings.classifier, settings.shard
    classifier_classes: tuple[str, ...] = ()
    if isinstance(classifier, CropClassifier):
        classifier_classes = classifier.names
    elif classifier is not None:
        classifier_classes = load_classifier(classifier).names
    distributed = shard is not None and shard.ctx.distributed
    batches = global_progress(loader, shard, desc="val", enabled=settings.progress) if distributed else loader
    for evaluator in evaluators if not distributed or shard.ctx.is_main else ():
        evaluator.reset()

    def feed(images: list[ImageResult]) -> None:
        for evaluator in evaluators:
            evaluator.process(images)

    results, speed = collect_results(model, batches, config=config, runtime=runtime, device=device,
                                     settings=replace(settings, progress=settings.progress and not distributed),
                                     on_batch=None if distributed else feed)  # fmt: skip
    if distributed:
        speed = gather_speed(shard, speed, len(results))
        results = gather_in_order(shard, results)
        if results is None:  # rank 0 scores
            return broadcast_object(shard.ctx, None)
        unit = getattr(loader, "batch_size", None) or config.batch
        for start in range(0, len(results), unit):  # the run's batches in order
            feed(results[start : start + unit])

    scored, _ = score_images(results, names=names, protocol=settings.protocol, max_det=config.max_det,
                             speed=speed, classifier_classes=classifier_classes)  # fmt: skip
    if distributed:
        broadcast_object(shard.ctx, scored)
    scored = replace(scored, image_results=tuple(results) if settings.keep_images else ())
    return replace(scored, outputs=tuple(evaluator.evaluate(scored) for evaluator in evaluators))


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
    scored = yolo if scorer.yolo_metrics else scorer.score(images, names=names, max_det=max_det)
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
    `val` reports it; per class by YOLO matching). With a protocol that has numbers of its own (not
    `yolo_metrics`: "coco", "visdrone"), the numbers of its table are added as "PROTOCOL/NAME" with NAME as
    that table prints it (AP, AP50, AP75, AR1, ...), in percent as printed.
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
    if not get_protocol(results.protocol).yolo_metrics:
        metrics |= {f"{results.protocol}/{k}": v for k, v in results.extra.items()}
        for name, values in results.protocol_per_class.items():
            per_class.setdefault(name, {}).update({f"{results.protocol}/{k}": v for k, v in values.items()})
    out = {"protocol": results.protocol, "metrics": metrics, "per_class": per_class}
    if results.classifier_classes:
        out["classifier_classes"] = list(results.classifier_classes)
    return out

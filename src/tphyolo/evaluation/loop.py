"""The validation loop: run a model over a loader of `Batch`es and feed its per-image results to evaluators.

Detections and ground truth are compared in original-image pixels: the inference core
(`tphyolo.infer.detector.Detector`) maps detections back from the letterboxed batch with each image's ratio
and padding, and the targets and ignore regions are mapped likewise. The metrics evaluator
(`tphyolo.evaluation.scoring`) scores them by a protocol of the registry, beside any evaluators of the caller's;
writers write files from their results. With a crop classifier, each batch's merged detections are
re-labelled from the original images (`Detector.reclassify`) before they are scored.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from tphyolo.data.files.image_io import read_image
from tphyolo.errors import InputError
from tphyolo.evaluation.evaluator import Evaluator, combine_results
from tphyolo.evaluation.results import EvalResults
from tphyolo.evaluation.scoring import METRICS, MetricsEvaluator
from tphyolo.evaluation.settings import DEFAULT_EVAL, EvalSettings
from tphyolo.evaluation.writers import Writer
from tphyolo.infer.backends.base import Backend
from tphyolo.infer.backends.pytorch import as_backend
from tphyolo.infer.config import VALIDATION, InferenceConfig
from tphyolo.infer.detector import Detector, PhaseTimes, View, ViewBatch
from tphyolo.infer.slicing import SliceConfig
from tphyolo.infer.windows import image_windows, view_batches
from tphyolo.metrics.protocol import ImageResult
from tphyolo.ops import cxcywh_to_xyxy
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.distributed import GlobalCount, broadcast_object, gather_to_main
from tphyolo.runtime.sharding import Shard

POLL_SECONDS = 0.1  # how often rank 0's bar looks at the others' count once its own share is done


def _ground_truth(batch, i: int, view: View) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Image i's classes (m,) int64, boxes (m, 4) and ignore regions (k, 4), xyxy in original pixels."""
    rows = batch.targets[batch.targets[:, 0] == i].float().cpu()
    _, _, bh, bw = batch.images.shape
    boxes = cxcywh_to_xyxy(rows[:, 2:6] * torch.tensor([bw, bh, bw, bh], dtype=torch.float32))
    return rows[:, 1].long(), view.unletterbox(boxes), view.unletterbox(batch.ignore[i].reshape(-1, 4))


@contextlib.contextmanager
def _as_detector(model: nn.Module | Backend | Detector, config: InferenceConfig, settings: EvalSettings, *,
                 runtime: RuntimeConfig | None, device: torch.device | None) -> Iterator[Detector]:  # fmt: skip
    """`model` itself when it is a Detector (`tphyolo.infer.build.build_detector`'s: its config and crop
    classifier its own); else the Detector of the backend `as_backend` makes of it, with `config` and
    `settings.classifier`."""
    if isinstance(model, Detector):
        yield model
        return
    with as_backend(model, runtime=runtime, device=device) as backend:
        yield Detector([backend], config, classifier=settings.classifier)


def collect_results(
    model: nn.Module | Backend | Detector,
    loader: Iterable,
    *,
    config: InferenceConfig = VALIDATION,
    settings: EvalSettings = DEFAULT_EVAL,
    runtime: RuntimeConfig | None = None,
    device: torch.device | None = None,
    on_batch: Callable[[list[ImageResult]], None] | None = None,
) -> tuple[list[ImageResult], dict[str, float]]:
    """Run `model` (a Detector as `build_detector` gives it, with its own config and crop classifier; a backend; or a
    module already prepared on `device`, run in eval mode) over `loader`; returns per-image results in original pixels
    (each batch's also given to `on_batch` as it comes) and the time per image in ms for "preprocess", "inference"
    (forward passes and NMS) and "mapping" (back to original pixels, merged), and "classify" with a crop classifier (the
    Detector's, else `settings.classifier`) that re-labels the detections of its classes.
    `config.imgsz` and `config.batch` are the loader's business and not used here -- except with
    `settings.slicing`: then each original image is read from its path again, cut into windows that are
    letterboxed to `config.imgsz` and run `config.batch` at a time, their detections merged by `config.merge`
    on the full image, and scored against the full image's ground truth. `settings.progress`: a progress bar."""
    results, seconds = [], {"preprocess": 0.0, "inference": 0.0, "mapping": 0.0}
    slicing = settings.slicing
    if settings.progress:
        loader = tqdm(loader, desc="val", unit="batch", leave=False)  # the results table follows
    with _as_detector(model, config, settings, runtime=runtime, device=device) as detector:
        if detector.classifier is not None:
            seconds["classify"] = 0.0
        config = detector.config
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


def evaluate(
    model: nn.Module | Backend | Detector,
    loader: Iterable,
    *,
    names: Sequence[str],
    config: InferenceConfig = VALIDATION,
    settings: EvalSettings = DEFAULT_EVAL,
    evaluators: Sequence[Evaluator] = (),
    writers: Sequence[Writer] = (),
    runtime: RuntimeConfig | None = None,
    device: torch.device | None = None,
) -> EvalResults:
    """Validate `model` on `loader`'s `Batch`es with `config` (thresholds, TTA, merging) and score the run as
    `settings` say (protocol, crop classifier, slicing: see `EvalSettings` and `collect_results`).

    `model` is a Detector as `tphyolo.infer.build.build_detector` gives it (then its config and crop classifier are the
    run's, not `config` and `settings.classifier`), a backend, or a module already prepared by `runtime` on `device`
    (fp16 weights with `runtime.half`, which then runs without autocast), put in eval mode for the run and given back in
    its previous mode. The run's metrics (`scoring.MetricsEvaluator`), then `evaluators` (`evaluation.evaluator`:
    results of one's own) are reset, given every batch's per-image results and asked for their results, which are
    combined by name (ValueError on a name given twice); then `writers` (`evaluation.writers`: the files a run writes),
    fed alike, write from those results. The METRICS EvalResults come back, with the speed and, in `outputs`, every
    other result and what each writer returned under its name.

    settings.shard: in a distributed run, which images `loader` holds (`runtime.sharding.Shard`): every rank calls
    this, rank 0 gathers the per-image results, feeds its evaluators and writers, and every rank returns the
    scores (the per-image results and outputs only on rank 0).
    """
    if isinstance(model, Detector):
        config, settings = model.config, replace(settings, classifier=model.classifier)
    classifier, shard = settings.classifier, settings.shard
    classifier_classes = classifier.names if classifier is not None else ()
    metrics = MetricsEvaluator(names=names, protocol=settings.protocol, max_det=config.max_det,
                               classifier_classes=classifier_classes,
                               confusion=any(writer.uses_confusion for writer in writers))  # fmt: skip
    fed = [metrics, *evaluators, *writers]
    distributed = shard is not None and shard.ctx.distributed
    batches = global_progress(loader, shard, desc="val", enabled=settings.progress) if distributed else loader
    for evaluator in fed if not distributed or shard.ctx.is_main else ():
        evaluator.reset()

    def feed(images: list[ImageResult]) -> None:
        for evaluator in fed:
            evaluator.process(images)

    images, speed = collect_results(model, batches, config=config, runtime=runtime, device=device,
                                    settings=replace(settings, progress=settings.progress and not distributed),
                                    on_batch=None if distributed else feed)  # fmt: skip
    if distributed:
        speed = gather_speed(shard, speed, len(images))
        images = shard.gather(images)
        if images is None:  # rank 0 scores
            return broadcast_object(shard.ctx, None)
        unit = getattr(loader, "batch_size", None) or config.batch
        for start in range(0, len(images), unit):  # the run's batches in order
            feed(images[start : start + unit])

    results = combine_results([metrics, *evaluators])
    results[METRICS] = scored = replace(results[METRICS], speed=speed)
    if distributed:
        broadcast_object(shard.ctx, scored)
    for writer in writers:
        if writer.name in results:
            raise InputError(f"writer {type(writer).__name__} is named {writer.name!r}, as a result of the run is; "
                             "results need names of their own")  # fmt: skip
        results[writer.name] = writer.write(results)
    outputs = {name: value for name, value in results.items() if name != METRICS}
    return replace(scored, image_results=tuple(images) if settings.keep_images else (), outputs=outputs)


def gather_speed(shard: Shard, speed: dict[str, float], images: int) -> dict[str, float]:
    """The ms per image of every rank's `speed` (over its `images`), weighted by their images: the time one
    image takes in one process of the run. Rank 0's answer; the other ranks get their own `speed` back."""
    gathered = gather_to_main(shard.ctx, (speed, images))
    if gathered is None:
        return speed
    total = max(sum(n for _, n in gathered), 1)
    return {key: sum(s[key] * n for s, n in gathered) / total for key in speed}


def global_progress(batches: Iterable[Any], shard: Shard, *, desc: str, enabled: bool = True) -> Iterator[Any]:
    """`batches`, counted over every rank: rank 0 shows one bar of all `shard.units` batches of the run (none
    when not `enabled`). Each batch is counted once the caller has processed it (when it asks for the next);
    rank 0's bar follows the others until they are done too."""
    counter = GlobalCount(shard.ctx)
    bar = None
    if enabled and shard.ctx.is_main:
        bar = tqdm(total=shard.units, desc=desc, unit="batch", leave=False)
    try:
        for batch in batches:
            yield batch
            done = counter.add(1)
            if bar is not None:
                bar.update(done - bar.n)
        while bar is not None and bar.n < shard.units:
            time.sleep(POLL_SECONDS)
            bar.update(counter.add(0) - bar.n)
    finally:
        if bar is not None:
            bar.close()

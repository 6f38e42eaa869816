"""The validation loop: run a model over a loader of `Batch`es and score its detections.

Detections and ground truth are compared in original-image pixels: predicted boxes are mapped back from the
letterboxed batch with each image's ratio and padding, and the targets and ignore regions likewise. Three
protocols score them: "yolo" (YOLOv5's AP at IoU 0.50:0.95 with 101-point interpolation, the numbers
training reports), "coco" (pycocotools' protocol through faster-coco-eval; ignore regions are crowd
regions) and "visdrone" (the VisDrone2019-DET toolkit's rules: detections and objects inside ignore
regions are dropped, at most 500 detections per image).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import cv2
import torch
from torch import nn

from tphyolo.engine.predict import Detections, detect_passes, merge_detections
from tphyolo.engine.tta import PLAIN, TTAConfig
from tphyolo.engine.writers import coco_image_id, coco_records, yolo_lines
from tphyolo.ops import cxcywh_to_xyxy, unletterbox
from tphyolo.runtime import RuntimeConfig, autocast, sdpa_context

PROTOCOLS = ("yolo", "coco", "visdrone")


@dataclass(frozen=True)
class ImageResult:
    """One image's detections and ground truth, in original pixels: `detections` (n, 6) x1, y1, x2, y2,
    score, class; `classes` (m,), `boxes` (m, 4) xyxy objects; `ignore` (k, 4) xyxy ignore regions."""

    path: str
    shape: tuple[int, int]  # (height, width)
    detections: torch.Tensor
    classes: torch.Tensor
    boxes: torch.Tensor
    ignore: torch.Tensor


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
    run's protocol; per_class: YOLO metrics per class; extra: the protocol's headline numbers (COCO/VisDrone
    percentages such as "AP", "AR500"); tables: the YOLO table, then the protocol's; speed: ms per image
    for "preprocess", "inference", "nms".
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

    @property
    def fitness(self) -> float:
        """0.1 * map50 + 0.9 * map, the checkpoint-selection score."""
        return 0.1 * self.map50 + 0.9 * self.map


def _targets_to_original(batch, i: int, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Image i's targets: classes (m,) int64 and boxes (m, 4) xyxy in original pixels."""
    rows = batch.targets[batch.targets[:, 0] == i].float().cpu()
    _, _, bh, bw = batch.images.shape
    boxes = cxcywh_to_xyxy(rows[:, 2:6] * torch.tensor([bw, bh, bw, bh], dtype=torch.float32))
    return rows[:, 1].long(), _unletterbox(boxes, batch, i, height, width)


def _unletterbox(boxes: torch.Tensor, batch, i: int, height: int, width: int) -> torch.Tensor:
    """(n, 4) xyxy in batch-image pixels -> original pixels of image i (clipped)."""
    return unletterbox(
        boxes.cpu(), ratio=batch.ratios[i].tolist(), pad=batch.pads[i].tolist(), width=width, height=height
    )


def _sync(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def collect_results(
    model: nn.Module,
    loader: Iterable,
    *,
    device: torch.device,
    runtime: RuntimeConfig,
    conf_thres: float,
    iou_thres: float,
    max_det: int,
    half: bool = False,
    tta: TTAConfig | None = None,
    merge: str = "wbf",
    merge_iou: float = 0.55,
    progress: bool = False,
) -> tuple[list[ImageResult], dict[str, float]]:
    """Run `model` (already on `device`, eval mode) over `loader`; returns per-image results in original
    pixels and the time per image in ms for "preprocess", "inference" and "nms"."""
    tta = tta or PLAIN
    stride = int(torch.as_tensor(model.stride).max())
    dtype = torch.float16 if half else torch.float32
    results, seconds = [], {"preprocess": 0.0, "inference": 0.0, "nms": 0.0}
    if progress:
        from tqdm import tqdm

        loader = tqdm(loader, desc="val", unit="batch")
    for batch in loader:
        t0 = _sync(device)
        x = batch.images.to(device, non_blocking=True).to(dtype) / 255.0  # (B, 3, H, W)
        if runtime.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        t1 = _sync(device)
        with torch.inference_mode(), autocast(runtime, device), sdpa_context(runtime):
            passes = detect_passes(model, x, tta=tta, stride=stride, conf=conf_thres, iou=iou_thres, max_det=max_det)
        t2 = _sync(device)
        for i in range(len(batch.paths)):
            height, width = batch.shapes0[i].tolist()
            lists = []
            for per_image in passes:
                rows = per_image[i].float().cpu().clone()
                rows[:, :4] = _unletterbox(rows[:, :4], batch, i, height, width)
                lists.append(rows)
            if len(lists) > 1:
                rows = merge_detections(lists, method=merge, width=width, height=height, iou=merge_iou, max_det=max_det)
            else:
                rows = lists[0]
            classes, boxes = _targets_to_original(batch, i, height, width)
            ignore = _unletterbox(batch.ignore[i].reshape(-1, 4), batch, i, height, width)
            results.append(ImageResult(str(batch.paths[i]), (height, width), rows, classes, boxes, ignore))
        t3 = _sync(device)
        seconds["preprocess"] += t1 - t0
        seconds["inference"] += t2 - t1
        seconds["nms"] += t3 - t2
    n = max(len(results), 1)
    return results, {k: 1000.0 * v / n for k, v in seconds.items()}


def save_predictions(results: Sequence[ImageResult], save_dir: Path, *, save_txt: bool, save_json: bool) -> None:
    """YOLO txt files (`labels/STEM.txt`, with scores) and/or `predictions.json` (COCO results)."""
    records = []
    for r in results:
        detections = Detections.from_rows(r.detections)
        stem = Path(r.path).stem
        if save_txt:
            (save_dir / "labels").mkdir(parents=True, exist_ok=True)
            lines = yolo_lines(detections, width=r.shape[1], height=r.shape[0], with_score=True)
            (save_dir / "labels" / f"{stem}.txt").write_text("".join(f"{line}\n" for line in lines))
        if save_json:
            records += coco_records(detections, coco_image_id(stem))
    if save_json:
        (save_dir / "predictions.json").write_text(json.dumps(records))


def save_batch_plots(results: Sequence[ImageResult], save_dir: Path, *, names: list[str], batches: int = 3) -> None:
    """`val_batchK_labels.jpg` and `val_batchK_pred.jpg`: up to 16 images each, ground truth vs detections
    (detections scoring at least 0.25)."""
    from tphyolo.data.image_io import read_image
    from tphyolo.engine.draw import draw_detections, image_grid

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
        cv2.imwrite(str(save_dir / f"val_batch{k}_labels.jpg"), image_grid(labels))
        cv2.imwrite(str(save_dir / f"val_batch{k}_pred.jpg"), image_grid(preds))


def _yolo_labels(r: ImageResult) -> torch.Tensor:
    """(m, 5) class, x1, y1, x2, y2 in original pixels, as the metrics expect."""
    return torch.cat([r.classes[:, None].float(), r.boxes], dim=1)


def score_yolo(results: Sequence[ImageResult], *, nc: int, confusion=None):
    """YOLO metrics over `results` (a `tphyolo.metrics.Summary`); fills `confusion` when given."""
    from tphyolo.metrics import DetectionStats

    stats = DetectionStats(nc)
    for r in results:
        stats.update(r.detections, _yolo_labels(r))
        if confusion is not None:
            confusion.update(r.detections, _yolo_labels(r))
    return stats.summarize()


def coco_ground_truth(results: Sequence[ImageResult], names: Sequence[str]) -> dict:
    """A COCO dataset dict of the results' ground truth; image ids are their positions, category ids the
    class ids. Each ignore region becomes one crowd annotation per category (it ignores every class)."""
    images, annotations = [], []
    for image_id, r in enumerate(results):
        height, width = r.shape
        images.append({"id": image_id, "width": width, "height": height, "file_name": Path(r.path).name})
        objects = [(c, box, 0) for c, box in zip(r.classes.tolist(), r.boxes.tolist(), strict=True)]
        crowd = [(c, box, 1) for box in r.ignore.tolist() for c in range(len(names))]
        for c, (x1, y1, x2, y2), is_crowd in objects + crowd:
            bbox = [x1, y1, x2 - x1, y2 - y1]
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": c,
                    "bbox": bbox,
                    "area": bbox[2] * bbox[3],
                    "iscrowd": is_crowd,
                }
            )
    categories = [{"id": c, "name": str(name)} for c, name in enumerate(names)]
    return {"images": images, "annotations": annotations, "categories": categories}


def score_coco(results: Sequence[ImageResult], *, names: Sequence[str], max_det: int):
    """The COCO protocol (a `tphyolo.metrics.coco.CocoResult`, percentages), maxDets 1, 10, 100, `max_det`."""
    from tphyolo.metrics.coco import evaluate_coco

    detections = []
    for image_id, r in enumerate(results):
        detections += coco_records(Detections.from_rows(r.detections), image_id)
    return evaluate_coco(coco_ground_truth(results, names), detections, max_dets=sorted({1, 10, 100, max_det}))


def score_visdrone(results: Sequence[ImageResult], *, names: Sequence[str]):
    """The VisDrone2019-DET toolkit protocol (a `tphyolo.metrics.visdrone.VisDroneResult`, percentages).
    Objects are categories class + 1, ignore regions category 0; detections by descending score."""
    from tphyolo.metrics.visdrone import ImageAnnotations, evaluate_visdrone

    if len(names) > 10:
        raise ValueError(f"the VisDrone protocol evaluates 10 classes; this dataset has {len(names)}")
    images = []
    for r in results:
        boxes = torch.cat([r.boxes, r.ignore])
        ltwh = torch.cat([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], dim=1)
        category = torch.cat([r.classes + 1, torch.zeros(len(r.ignore), dtype=torch.int64)])
        gt = torch.cat([ltwh, torch.ones(len(boxes), 1), category[:, None].float()], dim=1)
        d = r.detections[r.detections[:, 4].argsort(descending=True, stable=True)]
        det = torch.cat([d[:, :2], d[:, 2:4] - d[:, :2], d[:, 4:5], d[:, 5:6] + 1], dim=1)
        images.append(ImageAnnotations(gt.double().numpy(), det.double().numpy(), r.shape[0], r.shape[1]))
    return evaluate_visdrone(images, names=list(names) + [f"class{c}" for c in range(len(names), 10)])


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
    model: nn.Module,
    loader: Iterable,
    *,
    names: Sequence[str],
    device: torch.device | None = None,
    runtime: RuntimeConfig | None = None,
    conf_thres: float = 0.001,
    iou_thres: float = 0.6,
    max_det: int = 500,
    protocol: str = "yolo",
    half: bool = False,
    tta: TTAConfig | None = None,
    merge: str = "wbf",
    merge_iou: float | None = None,
    save_dir: Path | None = None,
    save_json: bool = False,
    save_txt: bool = False,
    plots: bool = False,
    progress: bool = False,
) -> EvalResults:
    """Validate `model` (on `device`; fp16 weights when `half`, then run without autocast) on `loader`'s
    `Batch`es.

    The model is put in eval mode for the run and given back in its previous mode. `tta` runs every pass of
    a TTAConfig and merges them per image (`merge`: "wbf" or "nms", `merge_iou`: default 0.55 for WBF,
    `iou_thres` for NMS). With `save_dir`: `save_txt` (labels/), `save_json` (predictions.json) and `plots`
    (val batch images, PR/F1/P/R curves, confusion matrix).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; known: {list(PROTOCOLS)}")
    if (save_json or save_txt or plots) and save_dir is None:
        raise ValueError("save_json, save_txt and plots need a save_dir")
    runtime = runtime or RuntimeConfig()
    device = torch.device(device) if device is not None else runtime.torch_device()
    if half:  # fp16 weights run as they are, without autocast
        runtime = replace(runtime, amp="off")
    merge_iou = merge_iou if merge_iou is not None else (0.55 if merge == "wbf" else iou_thres)
    was_training = model.training
    model.eval()
    try:
        results, speed = collect_results(
            model,
            loader,
            device=device,
            runtime=runtime,
            conf_thres=conf_thres,
            iou_thres=iou_thres,
            max_det=max_det,
            half=half,
            tta=tta,
            merge=merge,
            merge_iou=merge_iou,
            progress=progress,
        )
    finally:
        model.train(was_training)

    from tphyolo.metrics import ConfusionMatrix

    confusion = ConfusionMatrix(len(names)) if plots else None
    summary = score_yolo(results, nc=len(names), confusion=confusion)
    tables, extra = [summary.table(names)], {}
    map50, map_ = summary.map50, summary.map
    if protocol != "yolo":
        if protocol == "coco":
            scored = score_coco(results, names=names, max_det=max_det)
        else:
            scored = score_visdrone(results, names=names)
        tables.append(scored.table())
        extra = dict(scored.overall)
        map50, map_ = scored.overall["AP50"] / 100.0, scored.overall["AP"] / 100.0
    if save_dir is not None:
        save_dir = Path(save_dir)
        save_dir.mkdir(parents=True, exist_ok=True)
        save_predictions(results, save_dir, save_txt=save_txt, save_json=save_json)
        if plots:
            save_batch_plots(results, save_dir, names=list(names))
            save_metric_plots(summary, confusion, save_dir, names=list(names))
    return EvalResults(
        protocol=protocol,
        mp=summary.mp,
        mr=summary.mr,
        map50=map50,
        map=map_,
        per_class=_per_class(summary, results, names),
        images=len(results),
        instances=int(summary.labels_per_class.sum()),
        speed=speed,
        tables=tuple(tables),
        extra=extra,
        save_dir=save_dir,
    )


def format_results(results: EvalResults, *, verbose: bool = False) -> str:
    """The YOLO table (all classes when `verbose`, else the 'all' row), the protocol's table, and the speed."""
    yolo = results.tables[0].splitlines() if results.tables else []
    lines = yolo if verbose else yolo[:2]
    for table in results.tables[1:]:
        lines += ["", f"{results.protocol} protocol (percent):", table]
    speed = results.speed
    lines.append(
        f"Speed: {speed['preprocess']:.1f} ms pre-process, {speed['inference']:.1f} ms inference, "
        f"{speed['nms']:.1f} ms NMS and mapping per image"
    )
    return "\n".join(lines)

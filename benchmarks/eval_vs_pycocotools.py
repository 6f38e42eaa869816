"""Our COCO-protocol evaluation (`tphyolo.metrics.coco.evaluate_coco`, faster-coco-eval backend) against the
same call through pycocotools (when installed), with the VisDrone maxDets (1, 10, 100, 500), in one run: a
study of our implementation, not a setting a user chooses (the user-facing benchmarks are `tphyolo bench`).

    python benchmarks/eval_vs_pycocotools.py --images 500      # ours against pycocotools
    python benchmarks/eval_vs_pycocotools.py --clock cpu       # process CPU time: steadier on a shared machine

Data: `images` synthetic 1360 x 765 images with 60 ground-truth boxes each over 10 classes (a few crowd
regions), and detections that jitter the ground truth (some missed) plus false positives, 150 per image.
Both are checked to report the same AP first. Peak memory is not reported: both work outside PyTorch.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
import torch

from tphyolo.bench.report import Row, machine_info, print_report
from tphyolo.bench.timing import CLOCKS, time_call, time_calls
from tphyolo.metrics.coco import evaluate_coco

CPU = torch.device("cpu")
WIDTH, HEIGHT = 1360, 765
CLASSES = 10


def coco_inputs(images: int, *, per_image: int = 60, detections: int = 150, seed: int = 0) -> tuple[dict, list]:
    """(COCO ground-truth dict, COCO result records) for `images` synthetic images."""
    rng = np.random.default_rng(seed)
    gt_images, annotations, results = [], [], []
    for image_id in range(1, images + 1):
        gt_images.append({"id": image_id, "width": WIDTH, "height": HEIGHT, "file_name": f"{image_id}.jpg"})
        wh = rng.uniform(8, 120, (per_image, 2))
        xy = rng.uniform(0, 1, (per_image, 2)) * (np.array([WIDTH, HEIGHT]) - wh)
        labels = rng.integers(1, CLASSES + 1, per_image)
        crowd = rng.uniform(size=per_image) < 0.03
        for (x, y), (w, h), label, is_crowd in zip(xy, wh, labels, crowd, strict=True):
            annotations.append({
                "id": len(annotations) + 1, "image_id": image_id, "category_id": int(label),
                "bbox": [float(x), float(y), float(w), float(h)], "area": float(w * h), "iscrowd": int(is_crowd),
            })  # fmt: skip
        found = rng.uniform(size=per_image) < 0.8
        jitter = rng.normal(0, 0.1, (per_image, 4)) * np.concatenate([wh, wh], 1)
        boxes = np.concatenate([xy, wh], 1)[found] + jitter[found]
        box_labels = labels[found]
        extra = detections - len(boxes)
        fp_wh = rng.uniform(8, 120, (extra, 2))
        fp = np.concatenate([rng.uniform(0, 1, (extra, 2)) * (np.array([WIDTH, HEIGHT]) - fp_wh), fp_wh], 1)
        boxes = np.concatenate([boxes, fp])
        box_labels = np.concatenate([box_labels, rng.integers(1, CLASSES + 1, extra)])
        scores = np.concatenate([rng.uniform(0.3, 1.0, len(box_labels) - extra), rng.uniform(0.01, 0.6, extra)])
        boxes[:, 2:] = np.maximum(boxes[:, 2:], 1.0)
        for box, label, score in zip(boxes, box_labels, scores, strict=True):
            results.append({
                "image_id": image_id, "category_id": int(label), "bbox": [float(v) for v in box], "score": float(score),
            })  # fmt: skip
    categories = [{"id": i, "name": f"class{i}"} for i in range(1, CLASSES + 1)]
    return {"images": gt_images, "annotations": annotations, "categories": categories}, results


def bench_eval(
    *, images: int = 500, repeats: int = 3, clock: str = "wall", log: Callable[[str], None] = print
) -> list[Row]:
    """One Row: ours against pycocotools (ours alone when it is absent), timed by `clock` (timing.CLOCKS)."""

    log(f"bench eval: making {images} synthetic images of ground truth and detections ...")
    gt, detections = coco_inputs(images)
    config = f"{images} images x 60 gt x 150 detections, 10 classes, maxDets 1/10/100/500"
    ours_fn = lambda: evaluate_coco(gt, detections, backend="faster")  # noqa: E731
    try:
        import pycocotools  # noqa: F401
    except ImportError:
        log("bench eval: pycocotools is not installed; timing ours only")
        ours_t = time_call(ours_fn, device=CPU, warmup=0, repeats=repeats, clock=clock)
        absent = {"baseline": "absent", "clock": clock}
        return [Row("eval/coco", config, ours_t.median_ms, ours_spread_ms=ours_t.spread_ms, extra=absent)]
    base_fn = lambda: evaluate_coco(gt, detections, backend="pycocotools")  # noqa: E731
    log("bench eval: scoring once with each to compare the numbers ...")
    ours, reference = ours_fn(), base_fn()
    same = all(abs(ours.overall[k] - reference.overall[k]) < 1e-6 for k in reference.overall)
    if not same:
        log(f"bench eval: results differ: ours {ours.overall} vs pycocotools {reference.overall}")
    log(f"bench eval: timing {repeats} interleaved repeats of each ...")
    base_t, ours_t = time_calls([base_fn, ours_fn], device=CPU, warmup=0, repeats=repeats, clock=clock)
    log(f"eval {config}: pycocotools {base_t.median_ms:.0f} ms, ours {ours_t.median_ms:.0f} ms ({clock} time)")
    return [
        Row(
            "eval/coco", config, ours_t.median_ms, base_t.median_ms,
            ours_spread_ms=ours_t.spread_ms, baseline_spread_ms=base_t.spread_ms,
            extra={"baseline": "pycocotools", "same_ap": same, "AP": round(ours.overall["AP"], 3), "clock": clock},
        )
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and one repeat: checks that it runs")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls; the median is reported (default 3)")
    parser.add_argument("--images", type=int, default=None, help="synthetic images (default 500; 20 with --quick)")
    parser.add_argument("--clock", choices=CLOCKS, default="wall",
                        help="wall time, or the process's CPU time, which other load disturbs less")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if repeats < 1:
        parser.error(f"--repeats must be at least 1, got {repeats}")
    rows = bench_eval(images=args.images or (20 if args.quick else 500), repeats=repeats, clock=args.clock,
                      log=lambda line: print(line, flush=True))
    machine = machine_info(CPU)
    print_report(rows, machine, json_path=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

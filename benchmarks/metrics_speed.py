"""Speed of our COCO-protocol evaluation and weighted boxes fusion against the usual baselines.

    python benchmarks/metrics_speed.py [--images 500] [--repeats 3]

Prints, measured in this one run: COCO protocol (faster-coco-eval adapter vs pycocotools, maxDets
1/10/100/500) on synthetic drone-like images, and WBF (tphyolo vs ensemble_boxes) on 8 models x 300 boxes
x 10 classes. Results of both sides are checked equal before timing; times are process CPU time (best of
the repeats), so other load on the machine barely moves them.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def synthetic_coco(rng: np.random.Generator, n_images: int) -> tuple[dict, list[dict]]:
    """Dense small objects (about 70 per image, 10 classes, some crowd regions) and noisy detections."""
    images, annotations, detections = [], [], []
    for image_id in range(1, n_images + 1):
        images.append({"id": image_id, "width": 1360, "height": 765, "file_name": f"{image_id}.jpg"})
        for _ in range(int(rng.integers(20, 120))):
            x, y = rng.uniform(0, 1300), rng.uniform(0, 700)
            w, h = rng.uniform(4, 60), rng.uniform(4, 60)
            category = int(rng.integers(1, 11))
            annotations.append(
                {"id": len(annotations) + 1, "image_id": image_id, "category_id": category, "bbox": [x, y, w, h],
                 "area": w * h, "iscrowd": int(rng.random() < 0.03)}
            )  # fmt: skip
            for _ in range(int(rng.integers(0, 3))):
                guess = category if rng.random() < 0.9 else int(rng.integers(1, 11))
                box = [x + rng.normal(0, 2), y + rng.normal(0, 2), w * rng.uniform(0.8, 1.2), h * rng.uniform(0.8, 1.2)]
                score = float(rng.random())
                detections.append({"image_id": image_id, "category_id": guess, "bbox": box, "score": score})
        for _ in range(int(rng.integers(0, 40))):
            box = [rng.uniform(0, 1300), rng.uniform(0, 700), rng.uniform(4, 60), rng.uniform(4, 60)]
            guess, score = int(rng.integers(1, 11)), float(rng.random())
            detections.append({"image_id": image_id, "category_id": guess, "bbox": box, "score": score})
    categories = [{"id": c, "name": str(c)} for c in range(1, 11)]
    return {"images": images, "annotations": annotations, "categories": categories}, detections


def drone_wbf_inputs(rng: np.random.Generator, *, models=8, objects=300, classes=10):
    """Each model sees ~90% of `objects` small objects, with jittered boxes and random scores."""
    centres, sizes = rng.random((objects, 2)), rng.uniform(0.005, 0.04, (objects, 2))
    labels = rng.integers(0, classes, objects)
    out = ([], [], [])
    for _ in range(models):
        seen = rng.random(objects) > 0.1
        c = centres[seen] + rng.normal(0, 0.1, (seen.sum(), 2)) * sizes[seen]
        wh = sizes[seen] * np.exp(rng.normal(0, 0.1, (seen.sum(), 2)))
        out[0].append(np.concatenate([c - wh / 2, c + wh / 2], 1).astype(np.float32))
        out[1].append(rng.random(seen.sum()).astype(np.float32))
        out[2].append(labels[seen])
    return out


def best_time(fn, repeats: int) -> float:
    """Least CPU time of the process over `repeats` calls: steadier than wall time on a shared machine."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from ensemble_boxes import weighted_boxes_fusion as wbf_reference

    from tphyolo.metrics.coco import evaluate_coco
    from tphyolo.ops import weighted_boxes_fusion

    rng = np.random.default_rng(0)
    gt, dets = synthetic_coco(rng, args.images)
    ours = evaluate_coco(gt, dets)
    theirs = evaluate_coco(gt, dets, backend="pycocotools")
    assert ours.overall == theirs.overall, (ours.overall, theirs.overall)
    t_ours = best_time(lambda: evaluate_coco(gt, dets), args.repeats)
    t_ref = best_time(lambda: evaluate_coco(gt, dets, backend="pycocotools"), args.repeats)
    print(
        f"COCO protocol, {args.images} images, {len(gt['annotations'])} objects, {len(dets)} detections: "
        f"pycocotools {t_ref * 1000:.0f} ms, ours {t_ours * 1000:.0f} ms, {t_ref / t_ours:.1f}x"
    )

    inputs = drone_wbf_inputs(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = wbf_reference(*inputs)
        got = weighted_boxes_fusion(*inputs)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)
        t_ref = best_time(lambda: wbf_reference(*inputs), args.repeats * 10)
    t_ours = best_time(lambda: weighted_boxes_fusion(*inputs), args.repeats * 10)
    n_boxes = sum(len(b) for b in inputs[0])
    print(
        f"WBF, 8 models x 300 boxes x 10 classes ({n_boxes} boxes): ensemble_boxes {t_ref * 1000:.1f} ms, "
        f"ours {t_ours * 1000:.2f} ms, {t_ref / t_ours:.1f}x"
    )


if __name__ == "__main__":
    main()

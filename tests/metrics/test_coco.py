import numpy as np
import pytest

from tphyolo.metrics.coco import evaluate_coco

pytest.importorskip("pycocotools")


def scene(seed: int, n_images: int = 30):
    """Small objects of 4 classes, a few crowd regions, jittered and spurious detections; one image has 150
    detections of one class so that maxDets 100 truncates."""
    rng = np.random.default_rng(seed)
    images, anns, dets = [], [], []
    for image_id in range(1, n_images + 1):
        images.append({"id": image_id, "width": 640, "height": 480})
        for _ in range(int(rng.integers(0, 25))):
            x, y, w, h = rng.uniform(0, 600), rng.uniform(0, 440), rng.uniform(3, 40), rng.uniform(3, 40)
            cat = int(rng.integers(1, 5))
            crowd = int(rng.random() < 0.1)
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": cat, "bbox": [x, y, w, h],
                         "area": w * h, "iscrowd": crowd})  # fmt: skip
            for _ in range(int(rng.integers(0, 3))):
                box = [x + rng.normal(0, 2), y + rng.normal(0, 2), w * rng.uniform(0.7, 1.3), h * rng.uniform(0.7, 1.3)]
                dets.append({"image_id": image_id, "category_id": cat, "bbox": box, "score": float(rng.random())})
        extra = 150 if image_id == 1 else int(rng.integers(0, 10))
        for _ in range(extra):
            box = [rng.uniform(0, 600), rng.uniform(0, 440), rng.uniform(3, 40), rng.uniform(3, 40)]
            dets.append({"image_id": image_id, "category_id": 1, "bbox": box, "score": float(rng.random())})
    cats = [{"id": c, "name": f"c{c}"} for c in range(1, 5)]
    return {"images": images, "annotations": anns, "categories": cats}, dets


@pytest.mark.parametrize("max_dets", [(1, 10, 100, 500), (1, 10, 100)])
def test_equal_to_pycocotools(max_dets):
    gt, dets = scene(0)
    ours = evaluate_coco(gt, dets, max_dets=max_dets)
    theirs = evaluate_coco(gt, dets, max_dets=max_dets, backend="pycocotools")
    assert set(ours.overall) == {"AP", "AP50", "AP75"} | {f"AR{n}" for n in max_dets}
    assert ours.overall == pytest.approx(theirs.overall, abs=1e-9)
    assert ours.per_class.keys() == theirs.per_class.keys() == {"c1", "c2", "c3", "c4"}
    for name in ours.per_class:
        assert ours.per_class[name] == pytest.approx(theirs.per_class[name], abs=1e-9)
    assert 0 < ours.overall["AP"] < 100


def test_crowd_region_absorbs_detections():
    gt = {
        "images": [{"id": 1, "width": 100, "height": 100}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0},
            {"id": 2, "image_id": 1, "category_id": 1, "bbox": [50, 50, 40, 40], "area": 1600, "iscrowd": 1},
        ],
        "categories": [{"id": 1, "name": "car"}],
    }
    dets = [
        {"image_id": 1, "category_id": 1, "bbox": [60, 60, 10, 10], "score": 0.95},  # inside the crowd region
        {"image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "score": 0.9},
    ]
    res = evaluate_coco(gt, dets)
    assert res.overall["AP"] == pytest.approx(100.0)
    assert res.overall["AR1"] == pytest.approx(0.0)  # the single best detection is the ignored one
    assert evaluate_coco(gt, []).overall["AP"] == 0.0

"""The protocol registry and the one conversion of per-image results: dataset results (xyxy) and VisDrone txt
rows (xywh, crowd objects, "others") go through the same COCO and VisDrone conversions."""

import numpy as np
import pytest
import torch

from tphyolo.metrics.coco import coco_dataset, coco_detections, evaluate_coco
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.registry import PROTOCOLS, get_protocol
from tphyolo.metrics.visdrone import NAMES, ImageAnnotations, evaluate_visdrone, image_result

CAR, PEDESTRIAN = 4, 1  # VisDrone categories (class ids 3 and 0)


def test_registry_names_its_protocols_and_unknown_names_list_them():
    assert list(PROTOCOLS) == ["yolo", "coco", "visdrone"]
    for name, protocol in PROTOCOLS.items():
        assert protocol.name == name and isinstance(protocol.needs_image_size, bool)
    assert get_protocol("coco") is PROTOCOLS["coco"]
    with pytest.raises(ValueError, match=r"unknown protocol 'voc'; known: \['yolo', 'coco', 'visdrone'\]"):
        get_protocol("voc")


def test_visdrone_rows_become_objects_crowds_and_ignore_regions():
    gt = np.array(
        [
            [10, 10, 20, 20, 1, CAR, 0, 0],
            [1, 1, 5, 5, 0, 0, 0, 0],  # ignored region: crowd for every class
            [60, 60, 20, 20, 0, PEDESTRIAN, 0, 0],  # score 0: a crowd object of its own class
            [30, 30, 8, 8, 1, 11, 0, 0],  # "others": never scored
        ],
        float,
    )
    det = np.array([[10, 10, 20, 20, 0.9, CAR, -1, -1], [0, 0, 4, 4, 0.5, 11, -1, -1], [5, 5, 9, 9, 0.4, 0, -1, -1]])
    image = image_result("a", gt, det)
    assert image.classes.tolist() == [3, 0] and image.crowd.tolist() == [False, True]
    assert image.ignore.tolist() == [[1, 1, 5, 5]] and image.box_format == "xywh"
    assert image.detections[:, 5].tolist() == [3, 10, -1]  # every row kept, in file order
    dataset = coco_dataset([image], NAMES)
    got = [(a["category_id"], a["bbox"], a["iscrowd"]) for a in dataset["annotations"]]
    assert got[:2] == [(3, [10, 10, 20, 20], 0), (0, [60, 60, 20, 20], 1)]
    assert got[2:] == [(c, [1, 1, 5, 5], 1) for c in range(10)]
    assert [r["category_id"] for r in coco_detections([image], NAMES)] == [3]  # "others" and category 0 left out


def test_dataset_and_file_results_convert_alike():
    """The same image as a dataset gives it (xyxy, no crowd objects) and as a VisDrone file gives it."""
    gt = np.array([[10, 10, 20, 20, 1, CAR, 0, 0], [50, 40, 10, 30, 1, PEDESTRIAN, 0, 0], [1, 1, 5, 5, 0, 0, 0, 0]])
    det = np.array([[11, 10, 20, 20, 0.8, CAR, -1, -1], [50, 42, 10, 30, 0.6, PEDESTRIAN, -1, -1]])
    from_file = image_result("a", gt, det, shape=(80, 100))
    xyxy = torch.tensor([[10.0, 10, 30, 30], [50, 40, 60, 70]])
    detections = torch.tensor([[11.0, 10, 31, 30, 0.8, 3], [50, 42, 60, 72, 0.6, 0]], dtype=torch.float64)
    from_dataset = ImageResult("a", (80, 100), detections, torch.tensor([3, 0]), xyxy, torch.tensor([[1.0, 1, 6, 6]]))
    assert coco_dataset([from_file], NAMES) == coco_dataset([from_dataset], NAMES)
    assert coco_detections([from_file], NAMES) == coco_detections([from_dataset], NAMES)
    for name in ("coco", "visdrone", "yolo"):
        a, b = (PROTOCOLS[name].score([r], names=NAMES, max_det=500) for r in (from_file, from_dataset))
        assert a.overall == pytest.approx(b.overall) and a.overall["AP50"] > 0, name


def _random_files(seed: int, n_images: int = 5):
    """VisDrone rows with fractional coordinates, ignored regions, score-0 objects, "others", unsorted results."""
    rng = np.random.default_rng(seed)
    files = []
    for _ in range(n_images):
        n = int(rng.integers(1, 30))
        xy, wh = np.round(rng.uniform(0, 200, (n, 2)), 2), np.round(rng.uniform(4, 40, (n, 2)), 2)
        cat = rng.choice([0, 1, 2, 4, 4, 4, 11], n)
        score = (rng.random(n) > 0.15).astype(float)
        gt = np.column_stack([xy, wh, score, cat, np.zeros((n, 2))])
        m = int(rng.integers(0, 80))
        src = rng.integers(0, n, m)
        boxes = np.column_stack([xy[src], wh[src]]) + np.round(rng.uniform(-3, 3, (m, 4)), 2)
        category = np.where(cat[src] == 0, CAR, cat[src])
        det = np.column_stack([boxes, np.round(rng.random(m), 3), category, -np.ones((m, 2))])
        files.append((f"im{len(files)}", gt, det))
    return files


def test_visdrone_protocol_scores_file_rows_exactly_as_the_toolkit_function():
    files = _random_files(0)
    expected = evaluate_visdrone([ImageAnnotations(gt, det, 240, 240) for _, gt, det in files])
    images = [image_result(stem, gt, det, shape=(240, 240)) for stem, gt, det in files]
    got = PROTOCOLS["visdrone"].score(images, names=NAMES, max_det=500)
    assert got.overall == expected.overall and got.per_class == expected.per_class
    assert got.map50 == expected.overall["AP50"] / 100 and got.overall["AP"] > 0


def test_coco_protocol_on_file_rows_keeps_the_visdrone_crowd_rules():
    """Against the rules written out: objects of categories 1..10 (score 0: crowd of their own category),
    ignored regions crowd of every category, "others" left out, result rows of categories 1..10."""
    files = _random_files(1)
    images, annotations, results = [], [], []
    for image_id, (_, gt, det) in enumerate(files, start=1):
        images.append({"id": image_id})
        for row in gt:
            box, category = [float(v) for v in row[:4]], int(row[5])
            crowds = [(c, 1) for c in range(1, 11)] if category == 0 else [(category, int(row[4] == 0))]
            for c, crowd in crowds if category <= 10 else []:
                annotations.append(
                    {"id": len(annotations) + 1, "image_id": image_id, "category_id": c, "bbox": box,
                     "area": box[2] * box[3], "iscrowd": crowd}
                )  # fmt: skip
        for row in det:
            if 1 <= int(row[5]) <= 10:
                box = [float(v) for v in row[:4]]
                results.append({"image_id": image_id, "category_id": int(row[5]), "bbox": box, "score": row[4]})
    categories = [{"id": c, "name": NAMES[c - 1]} for c in range(1, 11)]
    expected = evaluate_coco({"images": images, "annotations": annotations, "categories": categories}, results)
    got = PROTOCOLS["coco"].score([image_result(s, g, d) for s, g, d in files], names=NAMES, max_det=500)
    assert got.overall == expected.overall and got.per_class == expected.per_class
    assert got.overall["AP50"] > 0


def test_visdrone_protocol_needs_the_size_of_images_with_ignored_regions():
    image = image_result("a", np.array([[1, 1, 5, 5, 0, 0, 0, 0]], float), np.zeros((0, 8)))
    with pytest.raises(ValueError, match="a: the VisDrone protocol needs the image size"):
        PROTOCOLS["visdrone"].score([image], names=NAMES, max_det=500)
    with pytest.raises(ValueError, match="evaluates 10 classes"):
        PROTOCOLS["visdrone"].score([image], names=[f"c{i}" for i in range(11)], max_det=500)


def test_yolo_protocol_reports_fractions_and_percentages():
    boxes = torch.tensor([[10.0, 10, 30, 30], [50, 50, 70, 90]])
    detections = torch.tensor([[10.0, 10, 30, 30, 0.9, 1], [50, 50, 70, 90, 0.8, 0], [0, 0, 5, 5, 0.7, 7]])
    image = ImageResult("a", (100, 100), detections, torch.tensor([1, 0]), boxes, torch.zeros((0, 4)))
    result = PROTOCOLS["yolo"].score([image], names=["a", "b"], max_det=500)  # class 7 is not a class: left out
    assert result.map50 == pytest.approx(0.995) and result.map == pytest.approx(0.995)
    assert result.overall == pytest.approx({"P": 100.0, "R": 100.0, "AP50": 99.5, "AP": 99.5})
    assert set(result.per_class) == {"a", "b"} and "mAP@.5:.95" in result.table


def test_each_protocol_says_which_saved_files_it_scores():
    from pathlib import Path

    from tphyolo.metrics.registry import COCO_JSON, GEOJSON, VISDRONE_TXT, saved_format

    formats = {name: p.saved_formats for name, p in PROTOCOLS.items()}
    assert formats == {"yolo": (VISDRONE_TXT, GEOJSON), "coco": (VISDRONE_TXT, COCO_JSON),
                       "visdrone": (VISDRONE_TXT, GEOJSON)}  # fmt: skip
    found = [saved_format(Path(p)) for p in ("gt.geojson", "gt.json", "annotations")]
    assert found == [GEOJSON, COCO_JSON, VISDRONE_TXT]

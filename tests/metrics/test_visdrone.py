import numpy as np
import pytest

from tphyolo.metrics.visdrone import ImageAnnotations, drop_in_ignored, evaluate_visdrone, match_image

CAR, PEDESTRIAN, OTHERS = 4, 1, 11


def obj(x, y, w, h, cat, score=1.0):
    return [x, y, w, h, score, cat, 0, 0]


def det(x, y, w, h, score, cat):
    return [x, y, w, h, score, cat, -1, -1]


def image(gt, dets, size=(100, 100)):
    return ImageAnnotations(np.array(gt, float), np.array(dets, float).reshape(-1, 8), *size)


def test_ignored_region_drops_boxes_half_inside():
    # region: columns 1..50 (1-based) of every row. A 20x20 box at left x covers columns x+1..x+20 of the mask
    # (the toolkit's integral-image read skips the first column and row): x=40 -> 10/20 = 0.5 -> dropped,
    # x=41 -> 9/20 -> kept.
    gt = np.array([obj(1, 1, 49, 99, 0), obj(40, 10, 20, 20, CAR), obj(41, 10, 20, 20, CAR)], float)
    dets = np.array([det(40, 10, 20, 20, 0.9, CAR), det(41, 10, 20, 20, 0.8, CAR), det(80, 80, 5, 5, 0.7, 1)])
    kept_gt, kept_det = drop_in_ignored(gt, dets, height=100, width=100)
    assert kept_gt[:, 0].tolist() == [41]
    assert kept_det[:, 0].tolist() == [41, 80]


def test_no_region_keeps_everything_but_category_zero_rows():
    gt = np.array([obj(40, 10, 20, 20, CAR)], float)
    kept_gt, kept_det = drop_in_ignored(gt, np.zeros((0, 8)), height=10, width=10)  # size unused here
    assert len(kept_gt) == 1 and len(kept_det) == 0


def test_perfect_detections_score_100_and_region_removal_applies_to_both():
    im = image(
        [obj(1, 1, 49, 99, 0), obj(10, 10, 20, 20, CAR), obj(60, 60, 20, 20, CAR)],  # first car under region
        [det(60, 60, 20, 20, 0.9, CAR)],
    )
    res = evaluate_visdrone([im])
    assert res.overall == pytest.approx(dict.fromkeys(res.overall, 100.0) | {"AR1": 100.0})
    assert list(res.per_class) == ["car"]


def test_category_11_never_evaluated_but_counts_toward_max_dets():
    gt = [obj(10, 10, 20, 20, OTHERS), obj(60, 60, 20, 20, CAR)]
    dets = [det(10, 10, 20, 20, 0.95, OTHERS), det(60, 60, 20, 20, 0.9, CAR)]
    res = evaluate_visdrone([image(gt, dets)])
    assert list(res.per_class) == ["car"]
    assert res.overall["AR1"] == 0.0  # the only detection kept at maxDets=1 is the category-11 one
    assert res.overall["AR10"] == 100.0 and res.overall["AP"] == 100.0


def test_max_dets_take_the_first_rows_of_the_file():
    gt = [obj(10, 10, 20, 20, CAR)]
    sorted_file = [det(60, 60, 20, 20, 0.9, CAR), det(10, 10, 20, 20, 0.8, CAR)]
    res = evaluate_visdrone([image(gt, sorted_file)])
    assert res.overall["AR1"] == 0.0 and res.overall["AR10"] == 100.0
    # a false positive first, then the hit: precision 1/2 at recall 1 -> AP 50
    assert res.overall["AP"] == pytest.approx(50.0)
    unsorted_file = sorted_file[::-1]  # the hit is the first row although it scores lower
    res = evaluate_visdrone([image(gt, unsorted_file)])
    assert res.overall["AR1"] == 100.0 and res.overall["AP"] == pytest.approx(50.0)


def test_classes_weighted_by_images_holding_them():
    car_hit = ([obj(10, 10, 20, 20, CAR)], [det(10, 10, 20, 20, 0.9, CAR)])
    im1 = image(*car_hit)
    im2 = image([*car_hit[0], obj(60, 60, 20, 20, PEDESTRIAN)], car_hit[1])  # the pedestrian is missed
    res = evaluate_visdrone([im1, im2])
    assert res.per_class["car"]["AP"] == 100.0 and res.per_class["pedestrian"]["AP"] == 0.0
    assert res.images_per_class == {"pedestrian": 1, "car": 2}
    assert res.overall["AP"] == pytest.approx(200 / 3)  # (2 * 100 + 1 * 0) / 3, not the plain mean 50


def test_ignore_objects_neither_hit_nor_miss_but_count_in_recall():
    gt = [obj(10, 10, 20, 20, CAR), obj(60, 60, 20, 20, CAR, score=0)]
    dets = [det(10, 10, 20, 20, 0.9, CAR), det(62, 62, 10, 10, 0.8, CAR)]  # second: inside the ignore object
    res = evaluate_visdrone([image(gt, dets)])
    assert res.overall["AR500"] == pytest.approx(50.0)  # 1 hit over 2 objects
    assert res.overall["AP"] == pytest.approx(50.0)  # precision stays 1 up to recall 0.5


def test_greedy_matching_uses_each_object_once():
    thresholds = np.array([0.5])
    gt = np.array([[0, 0, 10, 10, 0], [0, 0, 10, 10, 0], [0, 0, 10, 8, 0]], float)
    dets = np.array([[0, 0, 10, 10, 0.9], [0, 0, 10, 10, 0.8], [0, 0, 10, 10, 0.7], [0, 0, 10, 10, 0.6]])
    scores, flags = match_image(gt, dets, thresholds)
    assert scores.tolist() == [0.9, 0.8, 0.7, 0.6]
    assert flags.tolist() == [[1, 1, 1, 0]]


def _dense_reference(gt, dets, height, width):
    """The toolkit's procedure on a full image-size mask and its integral image (integer inputs)."""
    regions = np.maximum(1, gt[gt[:, 5] == 0, :4]).astype(int)
    objects = gt[gt[:, 5] != 0]
    mask = np.zeros((height, width))
    for x, y, w, h in regions:
        mask[y - 1 : min(height, y + h), x - 1 : min(width, x + w)] = 1
    integral = mask.cumsum(0).cumsum(1)

    def kept(rows):
        out = []
        for row in rows:
            x, y, w, h = np.maximum(1, row[:4]).astype(int)
            x, y = min(max(x, 1), width), min(max(y, 1), height)
            x2, y2 = min(width, x + w), max(1, min(height, y + h))
            val = integral[y - 1, x - 1] + integral[y2 - 1, x2 - 1] - integral[y - 1, x2 - 1] - integral[y2 - 1, x - 1]
            out.append(val / (w * h) < 0.5)
        return rows[np.array(out, dtype=bool)] if len(rows) else rows

    return kept(objects), kept(dets)


def test_ignored_region_removal_equals_dense_mask():
    rng = np.random.default_rng(0)
    for _ in range(20):
        height, width = int(rng.integers(20, 90)), int(rng.integers(20, 90))
        k, n = int(rng.integers(1, 5)), 40

        def boxes(count, cat):
            xy = rng.integers(-5, 100, (count, 2))
            wh = rng.integers(0, 50, (count, 2))
            return np.column_stack([xy, wh, np.ones(count), np.full(count, cat), np.zeros((count, 2))]).astype(float)

        gt = np.vstack([boxes(k, 0), boxes(n, CAR)])
        dets = boxes(n, CAR)
        got_gt, got_det = drop_in_ignored(gt, dets, height=height, width=width)
        want_gt, want_det = _dense_reference(gt, dets, height, width)
        np.testing.assert_array_equal(got_gt, want_gt)
        np.testing.assert_array_equal(got_det, want_det)


def _toolkit_reference(images):
    """calcAccuracy / evalRes / VOCap written out with plain loops (no ignored regions in `images`)."""
    thresholds = [0.5 + 0.05 * k for k in range(10)]
    ap, ar = np.zeros((10, 10)), np.zeros((10, 10, 4))
    eval_class = []
    for ci, c in enumerate(range(1, 11)):
        eval_class += [ci for im in images if (im.gt[:, 5] == c).any()]
        for ti, thr in enumerate(thresholds):
            for mi, max_dets in enumerate((1, 10, 100, 500)):
                n_gt, matches = 0, []
                for im in images:
                    gt = [[*r[:4], float(r[4] == 0)] for r in im.gt if r[5] == c]
                    dt = [list(r[:5]) for r in im.det[:max_dets] if r[5] == c]
                    dt.sort(key=lambda r: -r[4])  # stable
                    gt.sort(key=lambda r: r[4])
                    n_gt += len(gt)
                    state = [-1 if g[4] else 0 for g in gt]
                    for d in dt:
                        best, best_g, best_m = thr, -1, 0
                        for g, gb in enumerate(gt):
                            if state[g] == 1:
                                continue
                            if best_m != 0 and state[g] == -1:
                                break
                            w = min(d[0] + d[2], gb[0] + gb[2]) - max(d[0], gb[0])
                            h = min(d[1] + d[3], gb[1] + gb[3]) - max(d[1], gb[1])
                            oa = 0.0
                            if w > 0 and h > 0:
                                union = d[2] * d[3] if state[g] == -1 else d[2] * d[3] + gb[2] * gb[3] - w * h
                                oa = w * h / union
                            if oa < best:
                                continue
                            best, best_g, best_m = oa, g, 1 if state[g] == 0 else -1
                        if best_m == 1:
                            state[best_g] = 1
                        matches.append((d[4], best_m))
                matches.sort(key=lambda m: -m[0])
                tp = np.cumsum([m == 1 for _, m in matches])
                fp = np.cumsum([m == 0 for _, m in matches])
                rec = tp / max(1, n_gt)
                if len(rec):
                    ar[ci, ti, mi] = rec.max() * 100
            prec = tp / np.maximum(1, tp + fp)
            mrec, mpre = [0, *rec, 1], [0, *prec, 0]
            for i in range(len(mpre) - 2, -1, -1):
                mpre[i] = max(mpre[i], mpre[i + 1])
            ap[ci, ti] = sum((mrec[i] - mrec[i - 1]) * mpre[i] for i in range(1, len(mrec)) if mrec[i] != mrec[i - 1])
            ap[ci, ti] *= 100
    rows = np.array(eval_class)
    return {
        "AP": ap[rows].mean(), "AP50": ap[rows, 0].mean(), "AP75": ap[rows, 5].mean(),
        "AR1": ar[rows, :, 0].mean(), "AR10": ar[rows, :, 1].mean(), "AR100": ar[rows, :, 2].mean(),
        "AR500": ar[rows, :, 3].mean(),
    }  # fmt: skip


@pytest.mark.parametrize("sorted_files", [True, False])
def test_equal_to_a_loop_transcription_of_the_toolkit(sorted_files):
    rng = np.random.default_rng(int(sorted_files))
    images = []
    for _ in range(6):
        n = int(rng.integers(0, 40))
        xy, wh = rng.integers(0, 200, (n, 2)), rng.integers(4, 40, (n, 2))
        cat = rng.choice([1, 2, 4, 4, 4, 11], n)
        score = (rng.random(n) > 0.15).astype(float)  # some ignore objects
        gt = np.column_stack([xy, wh, score, cat, np.zeros((n, 2))]).astype(float)
        m = int(rng.integers(0, 150))
        src = rng.integers(0, max(n, 1), m)
        jitter = rng.integers(-4, 5, (m, 4))
        boxes = np.column_stack([xy[src], wh[src]]) + jitter if n else rng.integers(0, 200, (m, 4))
        dets = np.column_stack(
            [boxes, np.round(rng.random(m), 1), cat[src] if n else np.full(m, 4), np.zeros((m, 2))]
        ).astype(float)
        if sorted_files:
            dets = dets[np.argsort(-dets[:, 4], kind="stable")]
        images.append(ImageAnnotations(gt, dets, 300, 300))
    got = evaluate_visdrone(images).overall
    assert got == pytest.approx(_toolkit_reference(images), abs=1e-9)

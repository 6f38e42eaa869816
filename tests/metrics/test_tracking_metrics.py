"""Tracking metrics: equal to trackeval's own MOTChallenge evaluation, and the VisDrone-MOT / UAVDT rules on
hand-made sequences whose scores are known."""

from pathlib import Path

import numpy as np
import pytest

from tphyolo.data.mot.motchallenge import write_mot
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.visdrone_mot import write_visdrone_mot
from tphyolo.metrics.ignored import covered_fraction
from tphyolo.metrics.track_protocols import split_by_category
from tphyolo.metrics.tracking import _with_numpy_aliases, evaluate_tables, evaluate_tracking

COMPARED = ("HOTA", "DetA", "AssA", "LocA", "MOTA", "MOTP", "IDF1", "IDP", "IDR", "IDSW", "FP", "FN", "Frag", "MT")


def mot_sequence(seed: int, *, classes: bool) -> tuple[str, str, int]:
    """(gt.txt text, tracker output text, length) of a random MOTChallenge sequence: 6 walkers over 40 frames
    with noise, a missed stretch, an id swap, false positives, and (with `classes`) a zero-marked pedestrian, a
    static person and a distractor that the output also reports."""
    rng = np.random.default_rng(seed)
    length, gt, out = 40, [], []
    start = rng.uniform(50, 400, (6, 2))
    velocity = rng.normal(0, 3, (6, 2))
    for t in range(1, length + 1):
        for k in range(6):
            x, y = start[k] + velocity[k] * t
            cls = 1 if not classes else (1, 1, 1, 1, 7, 8)[k]
            consider = 0 if classes and k == 3 and t > 30 else 1
            gt.append(f"{t},{k + 1},{x:.2f},{y:.2f},30,70,{consider},{cls},1" if classes else
                      f"{t},{k + 1},{x:.2f},{y:.2f},30,70,1,-1,-1,-1")  # fmt: skip
            if k == 2 and 12 <= t <= 18:
                continue  # missed
            track_id = k + 1 if not (k in (0, 1) and t > 25) else 2 - k  # ids 1 and 2 swap at frame 26
            dx, dy = rng.normal(0, 2, 2)
            out.append(f"{t},{track_id},{x + dx:.2f},{y + dy:.2f},30,70,0.9,-1,-1,-1")
        if t % 7 == 0:
            out.append(f"{t},{100 + t},{rng.uniform(0, 500):.2f},{rng.uniform(0, 500):.2f},30,70,0.4,-1,-1,-1")
    return "\n".join(gt) + "\n", "\n".join(out) + "\n", length


def run_trackeval_directly(gt_root: Path, out_root: Path, lengths: dict[str, int], benchmark: str) -> dict:
    """trackeval's own evaluator on MOTChallenge folders: the combined pedestrian results of tracker 'ours'."""
    import trackeval

    evaluator = trackeval.Evaluator({
        "USE_PARALLEL": False, "PRINT_RESULTS": False, "PRINT_CONFIG": False, "TIME_PROGRESS": False,
        "OUTPUT_SUMMARY": False, "OUTPUT_DETAILED": False, "PLOT_CURVES": False, "LOG_ON_ERROR": None,
    })  # fmt: skip
    dataset = trackeval.datasets.MotChallenge2DBox({
        "GT_FOLDER": str(gt_root), "TRACKERS_FOLDER": str(out_root), "OUTPUT_FOLDER": str(out_root / "eval"),
        "TRACKERS_TO_EVAL": ["ours"], "BENCHMARK": benchmark, "SKIP_SPLIT_FOL": True, "SEQ_INFO": lengths,
        "PRINT_CONFIG": False,
    })  # fmt: skip
    metrics = [trackeval.metrics.HOTA(), trackeval.metrics.CLEAR({"PRINT_CONFIG": False}),
               trackeval.metrics.Identity({"PRINT_CONFIG": False})]  # fmt: skip
    results, _ = evaluator.evaluate([dataset], metrics)
    combined = results["MotChallenge2DBox"]["ours"]["COMBINED_SEQ"]["pedestrian"]
    hota, clear, identity = combined["HOTA"], combined["CLEAR"], combined["Identity"]
    return {
        "HOTA": 100 * np.mean(hota["HOTA"]), "DetA": 100 * np.mean(hota["DetA"]),
        "AssA": 100 * np.mean(hota["AssA"]), "LocA": 100 * np.mean(hota["LocA"]), "MOTA": 100 * clear["MOTA"],
        "MOTP": 100 * clear["MOTP"], "IDF1": 100 * identity["IDF1"], "IDP": 100 * identity["IDP"],
        "IDR": 100 * identity["IDR"], "IDSW": clear["IDSW"], "FP": clear["CLR_FP"], "FN": clear["CLR_FN"],
        "Frag": clear["Frag"], "MT": clear["MT"],
    }  # fmt: skip


@pytest.mark.parametrize(("benchmark", "classes"), [("MOT17", True), ("MOT15", False)])
def test_mot_scores_equal_trackevals_own_evaluation(tmp_path, benchmark, classes):
    gt_root, out_root = tmp_path / "gt", tmp_path / "trackers"
    lengths = {}
    for seed, name in enumerate(["SEQ-01", "SEQ-02"]):
        gt_text, out_text, length = mot_sequence(seed, classes=classes)
        (gt_root / name / "gt").mkdir(parents=True)
        (gt_root / name / "gt" / "gt.txt").write_text(gt_text, encoding="utf-8")
        (gt_root / name / "seqinfo.ini").write_text(f"[Sequence]\nname={name}\nseqLength={length}\n", encoding="utf-8")
        (out_root / "ours" / "data").mkdir(parents=True, exist_ok=True)
        (out_root / "ours" / "data" / f"{name}.txt").write_text(out_text, encoding="utf-8")
        lengths[name] = length
    expected = run_trackeval_directly(gt_root, out_root, lengths, benchmark)
    ours = evaluate_tracking(gt_root, out_root / "ours" / "data", fmt="mot")
    assert list(ours.per_class) == (["pedestrian"] if classes else ["object"])
    for field in COMPARED:
        assert ours.combined[field] == pytest.approx(expected[field], abs=1e-9), field
    assert 20 < ours.combined["HOTA"] < 95 and ours.combined["IDSW"] >= 2  # the sequence has errors of each kind
    assert set(ours.per_sequence) == {"SEQ-01", "SEQ-02"}


def visdrone_truth() -> TrackTable:
    """Two cars (ids 1, 2) and a pedestrian (3) over 10 frames, an ignored region (category 0) and an 'others'
    box (11) in every frame, and a motor (10, not evaluated)."""
    rows = []
    for t in range(1, 11):
        rows += [(t, 1, [10 + t, 10, 40 + t, 30], 1, 4), (t, 2, [100, 10 + t, 130, 30 + t], 1, 4),
                 (t, 3, [200, 200, 210, 220], 1, 1), (t, 4, [300, 300, 330, 320], 1, 10),
                 (t, -1, [400, 400, 500, 500], 0, 0), (t, 5, [600, 600, 640, 640], 1, 11)]  # fmt: skip
    frames, ids, boxes, scores, classes = zip(*rows, strict=True)
    return TrackTable.from_columns(frames, ids, boxes, scores, classes)


def output_from(truth: TrackTable, keep) -> TrackTable:
    rows = truth.select(keep)
    return TrackTable.from_columns(rows.frames, rows.ids + 50, rows.boxes, np.full(len(rows), 0.8), rows.classes)


def test_visdrone_perfect_output_scores_100_and_ignores_regions_others_and_unevaluated_classes():
    truth = visdrone_truth()
    perfect = output_from(truth, np.isin(truth.classes, (1, 4)))
    in_regions = TrackTable.from_columns(np.arange(1, 11), np.full(10, 90), np.tile([410, 410, 480, 480], (10, 1)),
                                         np.full(10, 0.9), np.full(10, 4))  # fmt: skip
    near_others = TrackTable.from_columns(np.arange(1, 11), np.full(10, 91), np.tile([605, 605, 640, 640], (10, 1)),
                                          np.full(10, 0.9), np.full(10, 4))  # fmt: skip
    motor = output_from(truth, truth.classes == 10)  # a class VisDrone-MOT does not evaluate
    output = TrackTable.concatenate([perfect, in_regions, near_others, motor])
    result = evaluate_tables({"uav1": truth}, {"uav1": output}, fmt="visdrone-mot")
    assert list(result.per_class) == ["pedestrian", "car"]  # the evaluated classes present
    for cls in ("car", "pedestrian"):
        metrics = result.per_class[cls]
        assert (metrics["HOTA"], metrics["MOTA"], metrics["IDF1"]) == pytest.approx((100.0, 100.0, 100.0))
        assert metrics["FP"] == metrics["FN"] == metrics["IDSW"] == 0
    assert result.combined["GT"] == 30 and result.combined["FP"] == 0
    assert set(result.class_averaged) == set(result.combined)


def test_visdrone_errors_are_counted():
    truth = visdrone_truth()
    cars = truth.select(truth.classes == 4)
    ids = np.where((cars.frames > 5) & (cars.ids == 1), 2, np.where((cars.frames > 5) & (cars.ids == 2), 1, cars.ids))
    swapped = TrackTable.from_columns(cars.frames, ids, cars.boxes, np.full(len(cars), 0.9), cars.classes)
    stray = TrackTable.from_columns([3], [9], [[700, 10, 730, 30]], [0.9], [4])
    result = evaluate_tables({"uav1": truth}, {"uav1": TrackTable.concatenate([swapped, stray])}, fmt="visdrone-mot")
    car = result.per_class["car"]
    assert (car["IDSW"], car["FP"], car["FN"]) == (2, 1, 0)
    assert car["IDF1"] == pytest.approx(100 * 2 * 10 / (20 + 21))  # 10 of 20 truth boxes on the best id each
    assert result.per_class["pedestrian"]["FN"] == 10 and result.combined["FN"] == 10
    # nothing detected, nothing localised: trackeval's LocA 100 and MOTP 0 are left undefined and printed '-'
    assert result.per_class["pedestrian"]["LocA"] is None and result.per_class["pedestrian"]["MOTP"] is None
    assert car["LocA"] == pytest.approx(100.0) and car["MOTP"] == pytest.approx(100.0)
    header, *rows = result.table().splitlines()
    row = next(line.split() for line in rows if line.startswith("pedestrian"))
    columns = header.split()
    assert row[columns.index("LocA")] == "-" and row[columns.index("MOTP")] == "-"
    assert row[columns.index("FN")] == "10"


def test_a_trajectory_that_changes_category_is_split_and_bad_ids_are_reported():
    truth = TrackTable.from_columns([1, 2, 3, 1], [7, 7, 7, 8], np.tile([0, 0, 10, 10], (4, 1)), None, [4, 5, 5, 4])
    split = split_by_category(truth)
    assert split.ids.tolist() == [7, 9, 9, 8]
    twice = TrackTable.from_columns([1, 1], [3, 3], [[0, 0, 10, 10], [20, 0, 30, 10]], [0.9, 0.9], [4, 4])
    with pytest.raises(ValueError, match=r"uav1 \(car\): output id 3 appears twice in frame 1"):
        evaluate_tables({"uav1": truth}, {"uav1": twice}, fmt="visdrone-mot")


def test_uavdt_is_class_agnostic_with_its_ignore_file(tmp_path):
    truth_rows = "\n".join(f"{t},1,10,10,30,20,1,1,{1 + t % 2}\n{t},2,100,100,30,20,1,1,1" for t in range(1, 6))
    (tmp_path / "gt").mkdir()
    (tmp_path / "gt" / "M0001_gt_whole.txt").write_text(truth_rows + "\n", encoding="utf-8")
    (tmp_path / "gt" / "M0001_gt_ignore.txt").write_text(
        "".join(f"{t},-1,90,90,60,60,1,-1,-1\n" for t in range(1, 6)), encoding="utf-8")  # fmt: skip
    output = TrackTable.from_columns(np.arange(1, 6), np.ones(5), np.tile([10, 10, 40, 30], (5, 1)), np.ones(5))
    write_mot(tmp_path / "out" / "M0001.txt", output)
    result = evaluate_tracking(tmp_path / "gt", tmp_path / "out", fmt="uavdt")
    assert list(result.per_class) == ["vehicle"]
    assert result.combined["FN"] == 0 and result.combined["MOTA"] == pytest.approx(100.0)  # object 2 is ignored
    write_visdrone_mot(tmp_path / "vd_out" / "M0001.txt", output)
    assert "combined" in result.table() and "HOTA" in result.table()


def test_covered_fraction_is_exact_on_overlapping_regions():
    # the toolkit's whole-pixel mask (xywh): regions cover 1-based rows/columns 1..11 and 5..15, union 193 pixels;
    # box 1 is read on rows/columns 2..21: 100 + 121 - 49 = 172 pixels of 400 (the overlap counted once)
    regions = np.array([[0, 0, 10, 10], [5, 5, 10, 10]], float)
    boxes = np.array([[0, 0, 20, 20], [5, 5, 5, 5], [20, 20, 10, 10], [3, 3, 0, 5]], float)
    got = covered_fraction(boxes, regions)
    np.testing.assert_allclose(got, [172 / 400, 1.0, 0.0, 1.0])  # sizes are clamped to >= 1 pixel


def test_numpy_aliases_are_provided_only_for_the_call_that_needs_them():
    assert "float" not in np.__dict__
    assert _with_numpy_aliases(lambda: np.float(3)) == 3.0  # the way trackeval's old releases use it
    assert "float" not in np.__dict__
    with pytest.raises(AttributeError, match="no attribute 'bogus'"):
        _with_numpy_aliases(lambda: np.bogus)

"""Tracking benchmarks are rows: a layout (`data/mot/layouts.py`) and rules (`metrics/track_protocols.py`) of the
same name, and nothing else names them."""

from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from tphyolo.data.mot import motchallenge
from tphyolo.data.mot.layouts import LAYOUTS
from tphyolo.data.mot.sequences import TRACK_FORMATS, read_ground_truth
from tphyolo.data.mot.table import TrackTable
from tphyolo.metrics.track_protocols import TRACK_RULES, TrackRules, prepare
from tphyolo.metrics.tracking import evaluate_tracking


def test_layouts_and_rules_name_the_same_benchmarks():
    assert list(LAYOUTS) == list(TRACK_RULES) == list(TRACK_FORMATS) == ["mot", "visdrone-mot", "uavdt"]
    assert all(name == row.name for name, row in LAYOUTS.items())
    assert all(name == row.name for name, row in TRACK_RULES.items())


def test_unknown_benchmark_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown tracking format 'kitti'.*uavdt"):
        prepare(TrackTable.empty(), TrackTable.empty(), "kitti")
    with pytest.raises(ValueError, match="unknown tracking format 'kitti'.*uavdt"):
        read_ground_truth("anywhere", "kitti")


def test_a_new_benchmark_is_one_layout_row_and_one_rules_row(tmp_path, monkeypatch):
    # "cars-only": MOTChallenge files, only class 3 (car) evaluated (MOTChallenge output has no class column)
    monkeypatch.setitem(LAYOUTS, "cars-only", replace(LAYOUTS["mot"], name="cars-only"))
    monkeypatch.setitem(TRACK_RULES, "cars-only", TrackRules("cars-only", {3: "car"}))
    (tmp_path / "gt" / "s1" / "gt").mkdir(parents=True)
    rows = [f"{t},1,10,10,30,20,1,3,1\n{t},2,100,100,30,20,1,1,1\n" for t in range(1, 6)]  # a car, a pedestrian
    (tmp_path / "gt" / "s1" / "gt" / "gt.txt").write_text("".join(rows), encoding="utf-8")
    output = TrackTable.from_columns(np.arange(1, 6), np.ones(5), np.tile([10, 10, 40, 30], (5, 1)), np.ones(5))
    motchallenge.write_mot(tmp_path / "out" / "s1.txt", output)
    result = evaluate_tracking(tmp_path / "gt", tmp_path / "out", fmt="cars-only")
    assert list(result.per_class) == ["car"]
    assert result.combined["MOTA"] == pytest.approx(100.0) and result.combined["GT"] == 5  # the pedestrians: not


def test_visdrone_mot_regions_are_clipped_to_the_first_frame(tmp_path):
    # a region reaching past the right edge of a 40 x 40 frame, and a car 30 wide from x = 26: on the frame's mask
    # 11 of its 30 columns are covered (kept); without the frame (a large enough image) 27 of 30 are (dropped)
    split = tmp_path / "split"
    (split / "annotations").mkdir(parents=True)
    (split / "annotations" / "s1.txt").write_text("1,-1,30,0,30,40,0,0,0,0\n1,1,26,5,30,10,1,4,0,0\n", "utf-8")
    (split / "out").mkdir()
    (split / "out" / "s1.txt").write_text("1,1,26,5,30,10,0.9,4,-1,-1\n", "utf-8")
    without_frames = evaluate_tracking(split / "annotations", split / "out", fmt="visdrone-mot")
    (split / "sequences" / "s1").mkdir(parents=True)
    Image.new("RGB", (40, 40)).save(split / "sequences" / "s1" / "0000001.jpg")
    [sequence] = read_ground_truth(split / "annotations", "visdrone-mot")
    assert sequence.frame_size == (40, 40)
    with_frames = evaluate_tracking(split / "annotations", split / "out", fmt="visdrone-mot")
    assert without_frames.combined["GT"] == 0 and without_frames.combined["FP"] == 0
    assert with_frames.combined["GT"] == 1 and with_frames.combined["MOTA"] == pytest.approx(100.0)

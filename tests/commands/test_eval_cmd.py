"""`tphyolo eval` on small hand-made folders and on real VisDrone annotations."""

import json

import pytest
from PIL import Image

from tphyolo.cli import main

GT = """10,10,20,20,1,4,0,0
60,60,20,20,1,1,0,0
1,1,5,5,0,0,0,0
"""
PRED = """10,10,20,20,0.9,4,0,0
60,62,20,20,0.8,1,0,0
40,40,10,10,0.7,4,0,0
"""


def _dataset(tmp_path, gt=GT, pred=PRED):
    for sub in ("annotations", "images", "pred"):
        (tmp_path / sub).mkdir()
    (tmp_path / "annotations" / "a.txt").write_text(gt)
    (tmp_path / "pred" / "a.txt").write_text(pred)
    Image.new("RGB", (100, 80)).save(tmp_path / "images" / "a.jpg")
    return tmp_path


def test_visdrone_protocol_writes_json(tmp_path, capsys):
    root = _dataset(tmp_path)
    out = tmp_path / "res.json"
    argv = ["eval", "--gt", str(root / "annotations"), "--pred", str(root / "pred"), "--json", str(out)]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert set(data) == {"AP", "AP50", "AP75", "AR1", "AR10", "AR100", "AR500", "per_class"}
    # car: hit first, then a false positive -> AP 100; pedestrian: IoU 0.82 -> hit at thresholds 0.50..0.80
    assert data["per_class"]["car"]["AP"] == pytest.approx(100.0)
    assert data["per_class"]["pedestrian"]["AP"] == pytest.approx(70.0)
    assert data["AP"] == pytest.approx(85.0)
    assert data["AR1"] == pytest.approx(50.0)  # only the first row (a car) is kept with maxDets 1
    assert "pedestrian" in capsys.readouterr().out


def test_coco_protocol_on_visdrone_folders(tmp_path):
    root = _dataset(tmp_path)
    out = tmp_path / "res.json"
    argv = ["eval", "--gt", str(root / "annotations"), "--pred", str(root / "pred"), "--protocol", "coco"]
    assert main([*argv, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["per_class"]["car"]["AP50"] == pytest.approx(100.0)
    assert set(data["per_class"]) == {"car", "pedestrian"}


@pytest.mark.parametrize(
    ("pred", "message"),
    [("10,10,20,20,0.9,4\n10,10,x,20,0.9,4\n", "a.txt:2: not a number"), ("10,10,20\n", "a.txt:1: expected 6 to 8")],
)
def test_bad_line_names_file_and_line(tmp_path, capsys, pred, message):
    root = _dataset(tmp_path, pred=pred)
    assert main(["eval", "--gt", str(root / "annotations"), "--pred", str(root / "pred")]) == 2
    assert message in capsys.readouterr().err


def test_missing_prediction_file_is_named(tmp_path, capsys):
    root = _dataset(tmp_path)
    (root / "pred" / "a.txt").unlink()
    assert main(["eval", "--gt", str(root / "annotations"), "--pred", str(root / "pred")]) == 2
    assert "no prediction file" in capsys.readouterr().err


def test_missing_image_for_ignored_regions_is_named(tmp_path, capsys):
    root = _dataset(tmp_path)
    (root / "images" / "a.jpg").unlink()
    assert main(["eval", "--gt", str(root / "annotations"), "--pred", str(root / "pred")]) == 2
    assert "no image a.*" in capsys.readouterr().err


@pytest.mark.parametrize("protocol", ["visdrone", "coco"])
def test_ground_truth_as_predictions_scores_100(visdrone_mini, tmp_path, protocol):
    out = tmp_path / "res.json"
    gt = visdrone_mini / "annotations"
    assert main(["eval", "--gt", str(gt), "--pred", str(gt), "--protocol", protocol, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    for key in ("AP", "AP50", "AP75", "AR500"):
        assert data[key] == pytest.approx(100.0), key
    assert len(data["per_class"]) == 10


def test_coco_json_inputs(tmp_path):
    gt = {
        "images": [{"id": 1, "width": 100, "height": 100}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 3, "bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0},
            {"id": 2, "image_id": 1, "category_id": 3, "bbox": [50, 50, 20, 20], "area": 400, "iscrowd": 0},
        ],
        "categories": [{"id": 3, "name": "bicycle"}],
    }
    dets = [{"image_id": 1, "category_id": 3, "bbox": [10, 10, 20, 20], "score": 0.9}]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dets))
    out = tmp_path / "res.json"
    argv = ["eval", "--gt", str(tmp_path / "gt.json"), "--pred", str(tmp_path / "dt.json"), "--protocol", "coco"]
    assert main([*argv, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["AR500"] == pytest.approx(50.0)  # one of two objects found
    assert data["AP"] == pytest.approx(100 * 51 / 101)  # precision 1 at recall points 0, 0.01, ..., 0.50


def test_visdrone_protocol_rejects_coco_json(tmp_path, capsys):
    (tmp_path / "gt.json").write_text("{}")
    assert main(["eval", "--gt", str(tmp_path / "gt.json"), "--pred", str(tmp_path)]) == 2
    assert "VisDrone annotation txt" in capsys.readouterr().err


def test_yolo_protocol_on_visdrone_folders(tmp_path):
    """YOLOv5's metrics from the same files: car hit (AP 0.995 at every IoU), pedestrian at IoU 0.82 (7 of 10)."""
    root = _dataset(tmp_path)
    out = tmp_path / "res.json"
    argv = ["eval", "--gt", str(root / "annotations"), "--pred", str(root / "pred"), "--protocol", "yolo"]
    assert main([*argv, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["per_class"]["car"]["AP"] == pytest.approx(99.5)
    assert data["per_class"]["pedestrian"]["AP"] == pytest.approx(99.5 * 0.7)
    assert data["AP50"] == pytest.approx(99.5) and data["AP"] == pytest.approx((99.5 + 99.5 * 0.7) / 2)


@pytest.mark.parametrize(
    ("pred", "message"),
    [
        ("10,10,,20,0.9,4,-1,-1\n", "a.txt:1: field 3 is empty"),
        ("10,10,20,20,nan,4,-1,-1\n", "a.txt:1: non-finite value"),
        ("10,10,inf,20,0.9,4,-1,-1\n", "a.txt:1: non-finite value"),
        ("10,10,20,20,0.9,4\n10,10,20,20,0.9,1.7,-1,-1\n", "a.txt:2: field 6 (category, truncation, occlusion) 1.7"),
        ("10,10,20,-20,0.9,4,-1,-1\n", "a.txt:1: negative box size 20x-20"),
        ("10,10,20,20,0.9,4,-1,-1,7\n", "a.txt:1: expected 6 to 8 comma-separated values, got 9"),
    ],
)
def test_a_malformed_visdrone_line_is_refused_not_shifted(tmp_path, capsys, pred, message):
    root = _dataset(tmp_path, pred=pred)
    assert main(["eval", "--gt", str(root / "annotations"), "--pred", str(root / "pred")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_trailing_commas_and_blank_lines_are_tolerated(tmp_path):
    root = _dataset(tmp_path, pred=PRED.replace("\n", ",\n\n"))
    assert main(["eval", "--gt", str(root / "annotations"), "--pred", str(root / "pred")]) == 0

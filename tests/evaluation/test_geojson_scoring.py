"""`tphyolo eval --gt truth.geojson --pred ortho.geojson`: boxes scored in map units, against known answers."""

import json

import pytest
import torch
from tests.helpers import exit_code

from tphyolo.cli import main
from tphyolo.evaluation.geojson_files import score_geojson_files
from tphyolo.ops.detections import Detections
from tphyolo.predict.geojson import geojson_collection

UTM = (0.5, 0.0, 500000.0, 0.0, -0.5, 4500000.0)  # 0.5 m pixels, north up
NAMES = ["car", "van"]
BOXES = [[10, 10, 50, 30], [100, 40, 140, 90], [200, 200, 260, 230]]
LABELS = [0, 1, 0]


def _write(path, boxes, labels, scores, crs="EPSG:32633"):
    detections = Detections(torch.tensor(boxes, dtype=torch.float32), torch.tensor(scores), torch.tensor(labels))
    path.write_text(json.dumps(geojson_collection(detections, names=NAMES, transform=UTM, crs=crs)))
    return path


def test_predictions_equal_to_the_truth_score_perfectly_and_a_miss_costs(tmp_path):
    truth = _write(tmp_path / "truth.geojson", BOXES, LABELS, [1.0, 1.0, 1.0])
    same = _write(tmp_path / "same.geojson", BOXES, LABELS, [0.9, 0.8, 0.7])
    perfect = score_geojson_files(truth, same)
    assert perfect.map50 == pytest.approx(0.995) and perfect.map == pytest.approx(0.995)
    # the third box moved by 40 of its 60 px (20 m): IoU 1/5, a false positive and a miss for "car"
    moved = _write(tmp_path / "moved.geojson", BOXES[:2] + [[240, 200, 300, 230]], LABELS, [0.9, 0.8, 0.7])
    partial = score_geojson_files(truth, moved)
    assert partial.per_class[0].recall == pytest.approx(0.5) and partial.per_class[1].map50 == pytest.approx(0.995)
    assert partial.map50 < perfect.map50


def test_eval_command_scores_geojson_and_refuses_two_crss(tmp_path, capsys):
    truth = _write(tmp_path / "truth.geojson", BOXES, LABELS, [1.0, 1.0, 1.0])
    pred = _write(tmp_path / "pred.geojson", BOXES, LABELS, [0.9, 0.8, 0.7])
    out = tmp_path / "numbers.json"
    assert main(["eval", "--gt", str(truth), "--pred", str(pred), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["AP50"] == pytest.approx(99.5)
    other = _write(tmp_path / "wgs.geojson", BOXES, LABELS, [0.9, 0.8, 0.7], crs="EPSG:4326")
    assert exit_code(["eval", "--gt", str(truth), "--pred", str(other)]) == 2
    assert "reproject one to the other's CRS" in capsys.readouterr().err
    (tmp_path / "point.geojson").write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": [1, 2]}, "properties": {"class": "car"}}]}))
    assert exit_code(["eval", "--gt", str(truth), "--pred", str(tmp_path / "point.geojson")]) == 2
    assert "feature 0: needs a Polygon or MultiPolygon geometry" in capsys.readouterr().err

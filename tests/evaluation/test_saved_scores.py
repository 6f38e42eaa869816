"""`tphyolo.evaluation.saved_scores`: saved detections scored from Python, as `tphyolo eval` scores them."""

import pytest
from PIL import Image

from tphyolo.evaluation.saved_scores import SavedScores, score_saved_detections

GT = "10,10,20,20,1,4,0,0\n60,60,20,20,1,1,0,0\n1,1,5,5,0,0,0,0\n"
PRED = "10,10,20,20,0.9,4,0,0\n60,62,20,20,0.8,1,0,0\n40,40,10,10,0.7,4,0,0\n"


def _folders(tmp_path):
    for sub in ("annotations", "images", "pred"):
        (tmp_path / sub).mkdir()
    (tmp_path / "annotations" / "a.txt").write_text(GT)
    (tmp_path / "pred" / "a.txt").write_text(PRED)
    Image.new("RGB", (100, 80)).save(tmp_path / "images" / "a.jpg")
    return tmp_path / "annotations", tmp_path / "pred"


def test_visdrone_folders_scored_by_the_visdrone_protocol(tmp_path):
    gt, pred = _folders(tmp_path)
    scored = score_saved_detections(gt, pred)  # images/ beside the annotations give the sizes
    assert isinstance(scored, SavedScores)
    # car: hit first, then a false positive -> AP 100; pedestrian: IoU 0.82 -> hit at thresholds 0.50..0.80
    assert scored.per_class["car"]["AP"] == pytest.approx(100.0)
    assert scored.per_class["pedestrian"]["AP"] == pytest.approx(70.0)
    assert scored.overall["AP"] == pytest.approx(85.0) and "pedestrian" in scored.table


def test_a_protocol_the_files_cannot_be_scored_by_is_refused(tmp_path):
    (tmp_path / "gt.json").write_text("{}")
    with pytest.raises(ValueError, match="needs a folder of VisDrone annotation txt files"):
        score_saved_detections(tmp_path / "gt.json", tmp_path / "dt.json", protocol="visdrone")
    with pytest.raises(ValueError, match="GeoJSON is scored by box IoU"):
        score_saved_detections(tmp_path / "gt.geojson", tmp_path / "dt.geojson", protocol="coco")

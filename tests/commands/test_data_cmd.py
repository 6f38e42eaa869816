"""`tphyolo data check` on a folder without a data yaml says how many classes it found."""

import cv2
import numpy as np

from tphyolo.cli import main


def test_a_visdrone_folder_reports_the_number_of_classes_it_found(tmp_path, capsys):
    (tmp_path / "images").mkdir()
    (tmp_path / "annotations").mkdir()
    cv2.imwrite(str(tmp_path / "images" / "a.jpg"), np.zeros((64, 64, 3), np.uint8))
    (tmp_path / "annotations" / "a.txt").write_text("1,1,10,10,1,4,0,0\n")  # one car
    assert main(["data", "check", "--data", str(tmp_path), "--no-scan-cache"]) == 0
    out = capsys.readouterr().out
    assert "unknown" not in out  # was: "(unknown number of classes)" above a list of ten
    assert out.splitlines()[-1].startswith("data: 10 classes found: pedestrian, people, bicycle, car,")

"""`tphyolo analyze --tracks` takes one track file as well as a folder of them (real UAVDT ground truth), and an
analysis whose inputs fail to read leaves no run folder behind to shift the next run's name."""

import json

import pytest
from tests.conftest import SHARED_DIR
from tests.helpers import require_shared

from tphyolo.cli import main

UAVDT_DIR = SHARED_DIR / "data" / "other" / "uavdt-gt-only"
LINES = "lines:\n  - name: v\n    points: [[300, 0], [300, 540]]\n  - name: h\n    points: [[0, 250], [1024, 250]]\n"


def _analyze(tracks, tmp_path, name: str) -> int:
    lines = tmp_path / "lines.yaml"
    lines.write_text(LINES)
    return main(["analyze", "--tracks", str(tracks), "--lines", str(lines), "--fps", "30", "--no-save-video",
                 "--project", str(tmp_path / "runs"), "--name", name])  # fmt: skip


def test_a_uavdt_ground_truth_file_is_analysed_as_its_folder(tmp_path, capsys):
    folder = require_shared(UAVDT_DIR, "UAVDT ground truth")
    assert _analyze(folder / "M0101_gt_whole.txt", tmp_path, "file") == 0  # was: "no such folder"
    assert _analyze(folder, tmp_path, "folder") == 0
    counts = [json.loads((tmp_path / "runs" / n / "counts.json").read_text()) for n in ("file", "folder")]
    assert counts[0] == counts[1] and counts[0]["lines"]["v"] == {"forward": {}, "backward": {"car": 6}}


@pytest.mark.parametrize("tracks", ["missing.txt", "bad.txt", "empty_dir"])
def test_an_analysis_whose_tracks_do_not_read_leaves_no_run_folder(tracks, tmp_path, capsys):
    (tmp_path / "bad.txt").write_text("not,a,track,row\n")
    (tmp_path / "empty_dir").mkdir()
    assert _analyze(tmp_path / tracks, tmp_path, "exp") == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "runs" / "exp").exists()  # was: an empty folder, so that the next run was exp2


def test_a_track_run_whose_detections_do_not_read_leaves_no_run_folder(tmp_path, capsys):
    (tmp_path / "dets").mkdir()
    (tmp_path / "dets" / "seq.txt").write_text("not,a,detection,row\n")
    argv = ["track", "--detections", str(tmp_path / "dets"), "--project", str(tmp_path / "runs"), "--name", "exp"]
    assert main(argv) == 2
    assert "seq.txt:1" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "exp").exists()  # was: a folder holding only the run's args.yaml

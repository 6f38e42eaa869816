"""MOT text formats (MOTChallenge, VisDrone-MOT, UAVDT): reading, writing, folder layouts and bad files."""

from pathlib import Path

import numpy as np
import pytest
from tests.conftest import SHARED_DIR
from tests.helpers import require_shared

from tphyolo.data.labels import LabelError
from tphyolo.data.mot.motchallenge import format_mot, read_mot, write_mot
from tphyolo.data.mot.sequences import (
    detection_files,
    ground_truth_files,
    read_detections,
    read_ground_truth,
    read_tracker_output,
    track_files,
)
from tphyolo.data.mot.table import UNKNOWN, TrackTable
from tphyolo.data.mot.uavdt import read_uavdt
from tphyolo.data.mot.visdrone_mot import format_visdrone_mot, read_visdrone_mot, write_visdrone_mot

UAVDT_DIR = SHARED_DIR / "data" / "other" / "uavdt-gt-only"


def sample_table() -> TrackTable:
    return TrackTable.from_columns(
        frames=[1, 1, 2],
        ids=[3, 7, 3],
        boxes=[[10.0, 20.0, 40.0, 35.5], [0.25, 1.0, 8.25, 9.0], [12.0, 21.0, 42.0, 36.5]],
        scores=[0.91234, 1.0, 0.5],
        classes=[4, 1, 4],
    )


def test_mot_output_text_and_round_trip(tmp_path):
    table = sample_table()
    assert format_mot(table).splitlines() == [
        "1,3,10,20,30,15.5,0.9123,4,-1,-1",
        "1,7,0.25,1,8,8,1,1,-1,-1",
        "2,3,12,21,30,15.5,0.5,4,-1,-1",
    ]
    back = read_mot(write_mot(tmp_path / "out" / "seq.txt", table))
    np.testing.assert_allclose(back.boxes, table.boxes)
    assert back.ids.tolist() == [3, 7, 3] and back.classes.tolist() == [UNKNOWN] * 3
    np.testing.assert_allclose(back.scores, [0.9123, 1.0, 0.5])


def test_visdrone_mot_text_and_round_trip(tmp_path):
    table = sample_table()
    assert format_visdrone_mot(table).splitlines()[1] == "1,7,0.25,1,8,8,1,1,-1,-1"
    back = read_visdrone_mot(write_visdrone_mot(tmp_path / "seq.txt", table))
    np.testing.assert_allclose(back.boxes, table.boxes)
    assert back.classes.tolist() == [4, 1, 4] and back.truncation.tolist() == [UNKNOWN] * 3


def test_mot_ground_truth_columns(tmp_path):
    path = tmp_path / "gt.txt"
    path.write_text("1,1,10,10,5,5,1,1,0.75\n1,2,30,30,5,5,0,7,1\n2,1,11,10,5,5,1,-1,-1,-1\n\n", encoding="utf-8")
    gt = read_mot(path, ground_truth=True)
    assert gt.classes.tolist() == [1, 7, UNKNOWN]  # MOT15 rows write -1: no class
    assert gt.scores.tolist() == [1.0, 0.0, 1.0] and gt.visibility.tolist() == [0.75, 1.0, UNKNOWN]
    assert [frame for frame, _ in gt.by_frame()] == [1, 2]


def test_uavdt_ground_truth_of_m0101():
    path = require_shared(UAVDT_DIR / "M0101_gt_whole.txt", "UAVDT M0101 ground truth")
    gt = read_uavdt(path)
    assert len(gt) == 5414 and gt.last_frame == 407
    assert {c: int((gt.classes == c).sum()) for c in (1, 2, 3)} == {1: 5156, 2: 188, 3: 70}
    assert gt.boxes[0].tolist() == [141.0, 147.0, 247.0, 192.0]  # 141,147,106,45
    [sequence] = read_ground_truth(UAVDT_DIR, "uavdt")
    assert sequence.name == "M0101" and len(sequence.ignore) == 670 and sequence.length is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1,2,3,4,5", "expected 8 to 10 comma-separated values"),
        ("1,2,3,4,5,6,1,1,0,0,9", "expected 8 to 10"),
        ("1,2,3,x,5,6,1,1", "not a number"),
        ("0,2,3,4,5,6,1,1", "frame 0 is not a frame number"),
        ("1.5,2,3,4,5,6,1,1", "frame 1.5"),
        ("1,2.5,3,4,5,6,1,1", r"field 2 \(id\) 2.5 is not a whole number"),
        ("1,2,3,4,-5,6,1,1", "negative box size"),
        ("1,2,3,4,5,6,1,-3", r"field 8 \(column 8\) -3 is not a level or category"),
        ("1,2,3,4,5,,1,1", "field 6 is empty"),
        ("1,2,3,4,5,nan,1,1", "non-finite"),
    ],
)
def test_bad_lines_name_the_file_and_line(tmp_path, line, message):
    path = tmp_path / "seq.txt"
    path.write_text(f"1,1,0,0,4,4,1,1,0,0\n{line}\n", encoding="utf-8")
    with pytest.raises(LabelError, match=message) as error:
        read_visdrone_mot(path)
    assert str(error.value).startswith(f"{path}:2: ")


def write(path: Path, text: str = "1,1,0,0,4,4,1,1,0,0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_ground_truth_layouts(tmp_path):
    write(tmp_path / "mot" / "S2" / "gt" / "gt.txt", "1,1,0,0,4,4,1,1,1\n")
    write(tmp_path / "mot" / "S1" / "gt" / "gt.txt", "1,1,0,0,4,4,1,1,1\n")
    write(tmp_path / "mot" / "S1" / "seqinfo.ini", "[Sequence]\nname=S1\nseqLength=600\n")
    assert list(ground_truth_files(tmp_path / "mot", "mot")) == ["S1", "S2"]
    assert [s.length for s in read_ground_truth(tmp_path / "mot", "mot")] == [600, None]
    write(tmp_path / "vd" / "annotations" / "uav1.txt")
    assert list(ground_truth_files(tmp_path / "vd", "visdrone-mot")) == ["uav1"]
    write(tmp_path / "flat" / "uav2.txt")
    assert list(ground_truth_files(tmp_path / "flat", "visdrone-mot")) == ["uav2"]
    assert list(ground_truth_files(tmp_path / "flat", "mot")) == ["uav2"]  # flat MOT files too
    with pytest.raises(FileNotFoundError, match=r"no uavdt sequences \(<seq>_gt_whole.txt\)"):
        ground_truth_files(tmp_path / "flat", "uavdt")
    with pytest.raises(ValueError, match="unknown tracking format"):
        ground_truth_files(tmp_path / "flat", "kitti")
    write(tmp_path / "bad" / "S1" / "gt" / "gt.txt", "1,1,0,0,4,4,1,1,1\n")
    write(tmp_path / "bad" / "S1" / "seqinfo.ini", "[Sequence]\nseqLength=soon\n")
    with pytest.raises(ValueError, match="seqinfo.ini: seqLength 'soon'"):
        read_ground_truth(tmp_path / "bad", "mot")


def test_tracker_output_and_detections(tmp_path):
    write(tmp_path / "pred" / "uav1.txt", "1,5,0,0,4,4,0.8,-1,-1,-1\n")
    outputs = read_tracker_output(tmp_path / "pred", "mot", ["uav1"])
    assert outputs["uav1"].ids.tolist() == [5]
    with pytest.raises(FileNotFoundError, match="uav2.txt: missing"):
        read_tracker_output(tmp_path / "pred", "mot", ["uav1", "uav2"])
    write(tmp_path / "det" / "MOT17-02" / "det" / "det.txt", "1,-1,0,0,4,4,0.8,-1,-1,-1\n")
    write(tmp_path / "det" / "uav1.txt", "1,-1,0,0,4,4,0.8,4,-1,-1\n2,-1,1,0,4,4,0.7,9,-1,-1\n")
    files = detection_files(tmp_path / "det")
    assert list(files) == ["MOT17-02", "uav1"]
    assert read_detections(files["MOT17-02"]).classes.tolist() == [UNKNOWN]
    assert read_detections(files["uav1"]).classes.tolist() == [4, 9]
    with pytest.raises(FileNotFoundError, match="no <seq>.txt"):
        detection_files(tmp_path / "pred" / "..")


def test_table_checks_shapes_and_selects():
    table = sample_table()
    assert len(table.select(table.ids == 3)) == 2 and TrackTable.empty().last_frame == 0
    assert list(TrackTable.empty().by_frame()) == []
    assert len(TrackTable.concatenate([table, table])) == 6
    with pytest.raises(ValueError, match="TrackTable.ids: shape"):
        TrackTable(**{**vars(table), "ids": np.zeros(2, np.int64)})


def test_a_track_file_row_without_a_track_id_and_a_detection_score_above_1_are_named(tmp_path):
    """analyze --tracks read id -1 (a detection file's rows) as no track, silently; a detection scored 2.5 went
    to the trackers' [0, 1] thresholds as it was."""
    from tphyolo.data.mot.sequences import read_tracks

    tracks = tmp_path / "tracks.txt"
    tracks.write_text("1,3,10,10,20,20,1,4,-1,-1\n2,-1,12,10,20,20,1,4,-1,-1\n")
    with pytest.raises(LabelError, match=rf"^{tmp_path}/tracks.txt: frame 2: id -1 is not a track id"):
        read_tracks(tracks)
    tracks.write_text("1,3,10,10,20,20,2,4,-1,-1\n1,0,0,0,50,50,0,0,-1,-1\n1,-1,0,0,9,9,0,0\n")  # ignored regions
    assert read_tracks(tracks).ids.tolist() == [3, 0, -1]
    detections = tmp_path / "det.txt"
    detections.write_text("1,-1,10,10,20,20,0.9,4,-1,-1\n1,-1,40,10,20,20,2.5,4,-1,-1\n")
    with pytest.raises(LabelError, match=r"det.txt:2: field 7 \(score\) 2.5 is not a confidence in \[0, 1\]"):
        read_detections(detections)


def test_one_track_file_is_named_and_read_as_in_its_folder(tmp_path):
    (tmp_path / "S1" / "gt").mkdir(parents=True)
    (tmp_path / "S1" / "gt" / "gt.txt").write_text("1,1,10,10,5,5,1,1,1\n")
    (tmp_path / "S2_gt_whole.txt").write_text("1,1,10,10,5,5,1,1,1\n")
    (tmp_path / "run.txt").write_text("1,1,10,10,5,5,0.9,4,-1,-1\n")
    found = {name: track_files(tmp_path / name) for name in ("S1/gt/gt.txt", "S2_gt_whole.txt", "run.txt")}
    assert [(list(files), fmt) for files, _, fmt in found.values()] == [
        (["S1"], "mot"), (["S2"], "uavdt"), (["run"], "visdrone-mot")]  # was: "no such folder" for each

"""The category column of `tphyolo track`'s MOT and VisDrone-MOT rows: one mapping from class to category,
the one `tphyolo predict --save-visdrone` uses (the class's number in the files' table, matched by name), and
the table written beside the rows."""

import numpy as np
import pytest

from tphyolo.cli import main
from tphyolo.data.categories import UAVDT, VISDRONE, CategoryTable, read_table
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.track.writers import TrackWriter


def rows(path):
    return [line.split(",") for line in path.read_text().splitlines()]


def test_a_detectors_classes_are_written_as_their_visdrone_categories_by_name(tmp_path):
    names = ["truck", "pedestrian", "car"]  # not VisDrone's order: the ids + 1 would be 1, 2, 3
    writer = TrackWriter(tmp_path, names=names, save_mot=True, save_visdrone=True, save_img=False)
    writer.start_sequence("seq")
    boxes = np.array([[0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50], [60, 60, 70, 70]], dtype=float)
    writer.write(1, boxes, [1, 2, 3, 4], [0.9, 0.8, 0.7, 0.6], [0, 1, 2, -1])
    writer.close()
    expected = [str(NAMES.index(n) + 1) for n in names] + ["-1"]  # truck 6, pedestrian 1, car 4; no class: -1
    assert [row[7] for row in rows(tmp_path / "mot" / "seq.txt")] == expected
    assert [row[7] for row in rows(tmp_path / "visdrone" / "seq.txt")] == expected


def test_classes_that_are_not_visdrones_are_numbered_as_their_data_set_and_the_table_is_written(tmp_path):
    with pytest.raises(ValueError, match="the model's classes person have no category in the table of"):
        TrackWriter(tmp_path / "a", names=["person", "car"], save_visdrone=True, save_img=False, categories=VISDRONE)
    writer = TrackWriter(tmp_path / "b", names=["person", "car"], save_mot=True, save_visdrone=True, save_img=False)
    writer.start_sequence("seq")
    writer.write(1, np.array([[0.0, 0, 10, 10], [20, 20, 30, 30]]), [1, 2], [0.9, 0.8], [1, 0])
    writer.close()
    assert [row[7] for row in rows(tmp_path / "b" / "mot" / "seq.txt")] == ["2", "1"]  # class index + 1
    assert read_table(tmp_path / "b" / "mot") == read_table(tmp_path / "b" / "visdrone") == CategoryTable(
        ("person", "car"), (1, 2))
    writer = TrackWriter(tmp_path / "c", names=["person", "car"], save_mot=True, save_img=False, categories=UAVDT)
    writer.start_sequence("seq")
    writer.write(1, np.array([[0.0, 0, 10, 10], [20, 20, 30, 30]]), [1, 2], [0.9, 0.8], [1, 0])
    writer.close()
    assert [row[7] for row in rows(tmp_path / "c" / "mot" / "seq.txt")] == ["1", "-1"]  # UAVDT's car; no person
    assert read_table(tmp_path / "c" / "mot") == CategoryTable(("car",), (1,))


def test_track_detections_keep_their_categories_in_mot_and_visdrone_rows(tmp_path):
    detections = tmp_path / "dets" / "seq.txt"
    detections.parent.mkdir()
    lines = []
    for frame in range(1, 6):  # two objects moving right, of categories 4 (car) and 1 (pedestrian)
        lines.append(f"{frame},-1,{10 + 2 * frame},10,20,12,0.9,4,-1,-1")
        lines.append(f"{frame},-1,{100 + 2 * frame},60,6,14,0.8,1,-1,-1")
    detections.write_text("\n".join(lines) + "\n")
    argv = ["track", "--detections", str(detections.parent), "--save-mot", "--save-visdrone", "--no-save-img",
            "--project", str(tmp_path), "--name", "run"]  # fmt: skip
    assert main(argv) == 0
    for folder in ("mot", "visdrone"):
        written = rows(tmp_path / "run" / folder / "seq.txt")
        assert len(written) >= 8
        by_id = {}
        for row in written:
            by_id.setdefault(row[1], set()).add(row[7])
        assert sorted(by_id.values(), key=sorted) == [{"1"}, {"4"}]  # each track keeps its detections' category

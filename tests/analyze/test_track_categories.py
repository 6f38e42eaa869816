"""`tphyolo analyze --tracks` names each track's class by the table of its files: UAVDT ground truth (1 car,
2 truck, 3 bus, in the ninth column), and the `categories.yaml` that a track writer puts beside its rows."""

import json

import numpy as np
import pytest

from tphyolo.cli import main
from tphyolo.data.categories import UAVDT
from tphyolo.track.writers import TrackWriter

LINE = "lines:\n  - name: l\n    points: [[0, 100], [400, 100]]\n"
FRAMES = 20
TRACKS = {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 3, 7: 3, 8: 2}  # id -> UAVDT category: five cars, two buses, a truck


def positions(track: int, frame: int) -> tuple[float, float]:
    """Each track runs straight down across y = 100 during the 20 frames, 45 px apart."""
    return 20.0 + 45 * track, 40.0 + 6 * frame


def uavdt_truth(folder, name="M0101"):
    """`<name>_gt_whole.txt` (frame,id,left,top,width,height,out_of_view,occlusion,category), with out-of-view and
    occlusion levels that are not the category, the same boxes with category -1 in `<name>_gt.txt`, and an
    ignore file, as UAVDT ships them."""
    folder.mkdir(parents=True, exist_ok=True)
    whole, plain = [], []
    for frame in range(1, FRAMES + 1):
        for track, category in TRACKS.items():
            x, y = positions(track, frame)
            box = f"{frame},{track},{x - 10:g},{y - 5:g},20,10"
            whole.append(f"{box},1,{1 + track % 2},{category}")
            plain.append(f"{box},1,{1 + track % 2},-1")
    (folder / f"{name}_gt_whole.txt").write_text("\n".join(whole) + "\n")
    (folder / f"{name}_gt.txt").write_text("\n".join(plain) + "\n")
    (folder / f"{name}_gt_ignore.txt").write_text("1,-1,0,0,5,5,-1,-1,-1\n")
    return folder


def counted(tmp_path, tracks, capsys) -> dict[str, int]:
    """Line crossings per class name (both directions) of `analyze --tracks`; checks there is one sequence."""
    (tmp_path / "lines.yaml").write_text(LINE)
    argv = ["analyze", "--tracks", str(tracks), "--lines", str(tmp_path / "lines.yaml"), "--fps", "25",
            "--project", str(tmp_path), "--name", "run", "--no-save-video"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    per_direction = json.loads((tmp_path / "run" / "counts.json").read_text())["lines"]["l"]
    totals: dict[str, int] = {}
    for classes in per_direction.values():
        for name, n in classes.items():
            totals[name] = totals.get(name, 0) + n
    return totals


def test_uavdt_ground_truth_counts_cars_as_cars(tmp_path, capsys):
    tracks = uavdt_truth(tmp_path / "gt")
    assert counted(tmp_path, tracks, capsys) == {"car": 5, "bus": 2, "truck": 1}


def test_a_track_runs_rows_are_read_back_by_the_table_written_beside_them(tmp_path, capsys):
    names = ["truck", "bus", "car"]  # a model's classes; the rows carry UAVDT's numbers (car 1)
    writer = TrackWriter(tmp_path / "track", names=names, save_mot=True, save_img=False, categories=UAVDT)
    writer.start_sequence("seq")
    labels = np.array([names.index(UAVDT.names[UAVDT.ids.index(c)]) for c in TRACKS.values()])
    for frame in range(1, FRAMES + 1):
        centres = np.array([positions(track, frame) for track in TRACKS])
        boxes = np.concatenate([centres - [10, 5], centres + [10, 5]], axis=1)
        writer.write(frame, boxes, list(TRACKS), np.full(len(TRACKS), 0.9), labels)
    writer.close()
    rows = np.loadtxt(tmp_path / "track" / "mot" / "seq.txt", delimiter=",", ndmin=2)
    assert sorted(set(rows[:, 7].astype(int).tolist())) == [1, 2, 3]  # UAVDT's numbers
    assert counted(tmp_path, tmp_path / "track" / "mot", capsys) == {"car": 5, "bus": 2, "truck": 1}


@pytest.mark.parametrize("bad", ["categories: [1, 2]\n", "categories: {1: car, 2: car}\n"])
def test_a_bad_table_beside_track_files_is_one_line(tmp_path, capsys, bad):
    folder = tmp_path / "tracks"
    folder.mkdir()
    (folder / "seq.txt").write_text("1,1,10,10,5,5,1,1,-1,-1\n")
    (folder / "categories.yaml").write_text(bad)
    (tmp_path / "lines.yaml").write_text(LINE)
    assert main(["analyze", "--tracks", str(folder), "--lines", str(tmp_path / "lines.yaml"), "--fps", "25",
                 "--project", str(tmp_path), "--no-save-video"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(folder / "categories.yaml") in err

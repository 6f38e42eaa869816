"""`tphyolo analyze` on a synthetic-mot sequence's true tracks (`--tracks`) with its frames (`--source`, for the
camera motion and the annotated video): the files of the run, the counts against the straight-path oracle, and
one line for each bad input."""

import csv
import json

import numpy as np
import pytest
import yaml
from tests.analyze.simulated import LINES, Truth, expected_counts, record, simulate

from tphyolo.cli import main
from tphyolo.data.builtin.synthetic_mot import WORLD_GSD
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.visdrone_mot import write_visdrone_mot


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(truth, folder of track files, folder of frames, lines yaml) of a drawn sequence."""
    root = tmp_path_factory.mktemp("analyze")
    truth = Truth(simulate(draw=True))
    tracks, frames, lines = record(truth, root, zones=[("road", [[150, 220], [300, 220], [300, 280], [150, 280]])])
    return truth, tracks, frames / "seq", lines


def test_tracks_with_their_frames_give_every_output_and_the_true_counts(recorded, tmp_path, capsys):
    truth, tracks, frames, lines = recorded
    gsd = WORLD_GSD / truth.zoom(0)
    argv = ["analyze", "--tracks", str(tracks), "--source", str(frames), "--lines", str(lines), "--fps", "25",
            "--gsd", str(gsd), "--project", str(tmp_path), "--name", "run"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    run = tmp_path / "run"
    assert "line h:" in out and "zone road:" in out and str(run) in out
    names = {p.name for p in run.iterdir()}
    assert {"counts.json", "events.csv", "tracks_speed.csv", "heatmap.png", "heatmap.npy", "seq.mp4"} <= names
    counts = json.loads((run / "counts.json").read_text())
    assert counts["lines"] == expected_counts(truth)  # camera motion estimated from the frames (sparse)
    with open(run / "events.csv", newline="") as file:
        events = list(csv.DictReader(file))
    crossings = [e for e in events if e["kind"] == "crossing"]
    assert len(crossings) == sum(sum(c.values()) for per in counts["lines"].values() for c in per.values())
    assert sum(e["kind"] == "entry" for e in events) == sum(counts["zones"]["road"]["entries"].values()) > 0
    with open(run / "tracks_speed.csv", newline="") as file:
        speeds = list(csv.DictReader(file))
    assert speeds and all(float(row["speed_kmh"]) >= 0 for row in speeds)
    heat = np.load(run / "heatmap.npy")
    assert heat.sum() == len(truth.rows)


def test_tracks_without_frames_still_give_the_heatmap_image(recorded, tmp_path, capsys):
    """No --source: heatmap.png is the heat of heatmap.npy over a plain canvas of its grid, with the scale."""
    import cv2

    from tphyolo.analyze.heatmap import SCALE_WIDTH

    _, tracks, _, lines = recorded
    argv = ["analyze", "--tracks", str(tracks), "--lines", str(lines), "--fps", "25", "--heatmap-cell", "4",
            "--project", str(tmp_path), "--name", "run"]  # fmt: skip
    assert main(argv) == 0
    heat, image = np.load(tmp_path / "run" / "heatmap.npy"), cv2.imread(str(tmp_path / "run" / "heatmap.png"))
    assert image.shape[:2] == (max(4 * heat.shape[0], 96), 4 * heat.shape[1] + SCALE_WIDTH)
    rows, columns = np.nonzero(heat)
    assert (image[4 * rows + 2, 4 * columns + 2] != 96).any(axis=1).all()  # every cell with tracks is coloured
    empty = np.argwhere(heat == 0)[0]
    assert (image[4 * empty[0] + 2, 4 * empty[1] + 2] == 96).all()  # the plain canvas elsewhere


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (["--gsd", "-1"], "--gsd: must be > 0"),
        (["--gsd", "0"], "--gsd: must be > 0"),
        (["--altitude", "50"], "--altitude, --focal-mm and --sensor-mm go together"),
        (["--anchor", "top"], "--anchor: invalid choice"),
    ],
)
def test_bad_flags_get_one_line_naming_the_flag(recorded, tmp_path, capsys, extra, problem):
    _, tracks, _, lines = recorded
    argv = ["analyze", "--tracks", str(tracks), "--lines", str(lines), "--project", str(tmp_path), *extra]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert problem in err[-1] and "Traceback" not in "\n".join(err)


def test_a_bad_lines_file_or_no_input_gets_one_line(recorded, tmp_path, capsys):
    _, tracks, frames, _ = recorded
    bad = tmp_path / "bad.yaml"
    bad.write_text("zones:\n  - name: bow\n    points: [[0, 0], [100, 100], [100, 0], [0, 100]]\n")
    cases = [
        (
            ["--tracks", str(tracks), "--source", str(frames), "--lines", str(bad)],
            f"{bad}: zone 'bow': its edges cross",
        ),
        (["--lines", str(bad)], "give one of --weights (with --source), --detections or --tracks"),
    ]
    for extra, problem in cases:
        code = _exit_code(["analyze", *extra, "--project", str(tmp_path)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and problem in err[0], err


def _exit_code(argv):
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.parametrize("tracker", ["bytetrack", "ocsort"])
def test_detections_tracked_with_camera_motion_count_as_the_truth(recorded, tmp_path, tracker):
    """The true boxes without their ids, tracked by ByteTrack with its sparse camera-motion compensation, or by
    OC-SORT, which has none: the camera motion is then estimated from the frames beside it."""
    truth, _, frames, lines = recorded
    rows = truth.rows
    detections = TrackTable.from_columns(rows.frames, np.full(len(rows), -1), rows.boxes, np.full(len(rows), 0.9),
                                         rows.classes)  # fmt: skip
    write_visdrone_mot(tmp_path / "detections" / "seq.txt", detections)
    argv = ["analyze", "--detections", str(tmp_path / "detections"), "--source", str(frames), "--lines", str(lines),
            "--tracker", tracker,
            "--fps", "25", "--no-save-video", "--project", str(tmp_path), "--name", "run"]  # fmt: skip
    assert main(argv) == 0
    counts = json.loads((tmp_path / "run" / "counts.json").read_text())["lines"]
    expected = expected_counts(truth)
    for line in expected:
        for direction in ("forward", "backward"):
            found, true = sum(counts[line][direction].values()), sum(expected[line][direction].values())
            assert abs(found - true) <= max(1, 0.05 * true), (line, direction, counts, expected)


def test_eval_count_scores_a_run_against_the_true_tracks(recorded, tmp_path, capsys):
    truth, tracks, frames, _ = recorded
    lines = tmp_path / "lines.yaml"
    lines.write_text(yaml.safe_dump({"lines": [{"name": n, "points": p} for n, p in LINES]}))
    run = tmp_path / "run"
    run.mkdir()
    expected = expected_counts(truth)
    (run / "counts.json").write_text(json.dumps({"lines": expected, "zones": {}}))
    argv = ["eval", "--task", "count", "--gt", str(tracks), "--pred", str(run), "--lines", str(lines),
            "--source", str(frames), "--json", str(tmp_path / "score.json")]  # fmt: skip
    true_total = sum(sum(c.values()) for per in expected.values() for c in per.values())
    assert main(argv) == 0
    assert f"count error 0 of {true_total} (0.0 %)" in capsys.readouterr().out
    forward = expected["h"]["forward"]
    wrong = {"lines": {**expected, "h": {**expected["h"], "forward": {"bus": forward.get("bus", 0) + 1}}}}
    (run / "counts.json").write_text(json.dumps(wrong))  # one bus too many, every other class forgotten
    assert main(argv) == 0
    score = json.loads((tmp_path / "score.json").read_text())
    assert (
        score["error"] == 1 + sum(n for label, n in forward.items() if label != "bus") and score["true"] == true_total
    )

"""Frame numbers read from files never size an allocation or a loop: `track --detections` and `eval --task track`
handle frames sparsely (a row at frame 10^7, a seqLength of 10^6 cost what a small number costs, with the same
results), and numbers past the documented bound (`MAX_FRAME`) or not plain ASCII integers (`1_0`, `²`) are
refused with file:line (seqinfo.ini: file and key). The files are generated here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.helpers import exit_code, one_error_line
from tests.reliability.corpus import finishes_within

from tphyolo.data.mot.rows import MAX_FRAME
from tphyolo.data.mot.table import TrackTable
from tphyolo.track.precomputed import track_detections
from tphyolo.track.registry import make_tracker


def _rows(frames: list[int], *, x: float = 10.0) -> str:
    """One detection (VisDrone-MOT, category 4) per frame, moving 2 px a frame from `x`."""
    return "".join(f"{f},-1,{x + 2 * k:.0f},20,30,20,0.9,4,-1,-1\n" for k, f in enumerate(frames))


@pytest.mark.parametrize("name", ["bytetrack", "ocsort"])
def test_sparse_tracking_of_detections_equals_visiting_every_frame(name, tmp_path):
    """The oracle visits frames 1..last one by one; a gap longer than the track buffer is skipped in one step."""
    from tphyolo.data.mot.sequences import read_detections

    (tmp_path / "s.txt").write_text(_rows([1, 2, 3, 4]) + _rows([10, 11]) + _rows([500, 501, 502, 503, 504], x=200))
    table = read_detections(tmp_path / "s.txt")
    sparse = [(n, t.ids.tolist(), t.boxes.round(3).tolist()) for n, _, t in track_detections(table, make_tracker(name))]
    by_frame, dense, tracker = dict(table.by_frame()), [], make_tracker(name)
    tracker.reset()
    for number in range(1, table.last_frame + 1):
        rows = by_frame.get(number, TrackTable.empty())
        t = tracker.update(rows.boxes, rows.scores, rows.classes)
        dense.append((number, t.ids.tolist(), t.boxes.round(3).tolist()))
    assert [d for d in dense if d[1]] == [s for s in sparse if s[1]]
    assert len(sparse) < 100 < len(dense)  # the gap was skipped
    shown = {n for n, ids, _ in sparse if ids}
    assert min(shown) <= 11 and max(shown) >= 500  # tracks confirmed on both sides of the gap


def test_track_detections_at_frame_ten_million_finishes(tmp_path, capsys):
    (tmp_path / "dets").mkdir()
    (tmp_path / "dets" / "s.txt").write_text(_rows([1, 2, 3]) + _rows([10**7, 10**7 + 1, 10**7 + 2]))
    argv = ["track", "--detections", str(tmp_path / "dets"), "--save-mot", "--project", str(tmp_path), "--name", "r"]
    assert finishes_within(60, lambda: exit_code(argv)) == 0
    written = np.loadtxt(tmp_path / "r" / "mot" / "s.txt", delimiter=",", ndmin=2)
    assert written[:, 0].max() == 10**7 + 2


@pytest.mark.parametrize("frame", [str(MAX_FRAME + 1), "1000000000000", "1e20", "1_0", "\u00b2", "\u0661"])
def test_a_frame_number_out_of_bounds_or_not_plain_is_refused_with_file_and_line(frame, tmp_path, capsys):
    (tmp_path / "dets").mkdir()
    path = tmp_path / "dets" / "s.txt"
    path.write_text(_rows([1]) + f"{frame},-1,10,20,30,20,0.9,4,-1,-1\n", encoding="utf-8")
    argv = ["track", "--detections", str(tmp_path / "dets"), "--project", str(tmp_path)]
    assert finishes_within(30, lambda: exit_code(argv)) == 2
    assert f"{path}:2: " in one_error_line(capsys.readouterr().err, "track")


def _mot_ground_truth(root: Path, *, seq_length: str | bytes | None, truth_frames: list[int]) -> list[str]:
    """A MOTChallenge layout: <root>/gt/S/gt/gt.txt (+ seqinfo.ini) and <root>/pred/S.txt (the truth itself)."""
    seq = root / "gt" / "S"
    (seq / "gt").mkdir(parents=True)
    rows = "".join(f"{f},1,{10 + f % 50},20,30,40,1,1,1\n" for f in truth_frames)
    (seq / "gt" / "gt.txt").write_text(rows)
    if seq_length is not None:
        ini = b"[Sequence]\nname=S\nseqLength=" + (seq_length if isinstance(seq_length, bytes) else seq_length.encode())
        (seq / "seqinfo.ini").write_bytes(ini + b"\n")
    (root / "pred").mkdir()
    (root / "pred" / "S.txt").write_text("".join(f"{f},7,{10 + f % 50},20,30,40,0.9,-1,-1,-1\n" for f in truth_frames))
    return ["eval", "--task", "track", "--format", "mot", "--gt", str(root / "gt"), "--pred", str(root / "pred")]


def _combined(out: str) -> list[str]:
    return next(line for line in out.splitlines() if line.startswith("combined")).split()


def test_a_long_sequence_with_few_annotated_frames_is_scored_as_a_short_one(tmp_path, capsys):
    """seqLength 10^6 with 10 annotated frames: the scores of seqLength 10 (the oracle), at once."""
    assert exit_code(_mot_ground_truth(tmp_path / "a", seq_length="10", truth_frames=list(range(1, 11)))) == 0
    short = _combined(capsys.readouterr().out)
    argv = _mot_ground_truth(tmp_path / "b", seq_length="1000000", truth_frames=list(range(1, 11)))
    assert finishes_within(60, lambda: exit_code(argv)) == 0
    assert _combined(capsys.readouterr().out) == short and float(short[1]) > 99  # HOTA of the truth itself


@pytest.mark.parametrize(
    ("seq_length", "frames", "where"),
    [
        ("\u00b2", [1, 2], "seqinfo.ini: seqLength"),
        ("1_0", [1, 2], "seqinfo.ini: seqLength"),
        (str(MAX_FRAME + 1), [1, 2], "seqinfo.ini: seqLength"),
        (b"10\n# caf\xe9", [1, 2], "seqinfo.ini: not UTF-8"),
        (None, [1, 10**12], "gt.txt:2: "),
    ],
)
def test_bad_frame_numbers_in_ground_truth_name_the_file(seq_length, frames, where, tmp_path, capsys):
    argv = _mot_ground_truth(tmp_path, seq_length=seq_length, truth_frames=frames)
    assert finishes_within(30, lambda: exit_code(argv)) == 2
    assert where in one_error_line(capsys.readouterr().err, "eval")


def test_an_ignore_file_at_a_huge_frame_is_refused_with_file_and_line(tmp_path, capsys):
    (tmp_path / "gt").mkdir()
    (tmp_path / "pred").mkdir()
    (tmp_path / "gt" / "S_gt_whole.txt").write_text("1,1,10,20,30,40,1,1,1\n")
    (tmp_path / "gt" / "S_gt_ignore.txt").write_text("1,-1,0,0,5,5,1,-1,-1\n10000000000000,-1,0,0,5,5,1,-1,-1\n")
    (tmp_path / "pred" / "S.txt").write_text("1,1,10,20,30,40,1,-1,-1,-1\n")
    argv = ["eval", "--task", "track", "--format", "uavdt", "--gt", str(tmp_path / "gt")]
    argv += ["--pred", str(tmp_path / "pred")]
    assert finishes_within(30, lambda: exit_code(argv)) == 2
    assert f"{tmp_path / 'gt' / 'S_gt_ignore.txt'}:2: " in one_error_line(capsys.readouterr().err, "eval")

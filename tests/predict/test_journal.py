"""The prediction journal: finished units read back exactly, and a line cut short by an interruption neither
counts nor spoils the lines a resumed run appends after it."""

from __future__ import annotations

import torch

from tphyolo.predict.runner.journal import FrameRecord, Journal, UnitRecord, finished_records


def unit(*files: str) -> UnitRecord:
    rows = torch.tensor([[1.5, 2.25, 30.125, 40.0, 0.123456789, 3.0]], dtype=torch.float32)
    frames = tuple(FrameRecord(f, 0, f"{f}.jpg", rows) for f in files)
    return UnitRecord(files, detections=len(files), skipped=0, frames=frames)


def test_units_come_back_with_their_float32_rows(tmp_path):
    Journal(tmp_path, 0).record(unit("a", "b"))
    Journal(tmp_path, 1).record(unit("c"))
    units = sorted(finished_records(tmp_path, read=UnitRecord.from_json), key=lambda u: u.files)
    assert [u.files for u in units] == [("a", "b"), ("c",)]
    assert torch.equal(units[0].frames[1].rows, unit("b").frames[0].rows)


def test_a_line_cut_short_is_redone_and_the_next_lines_parse(tmp_path):
    first = Journal(tmp_path, 0)
    first.record(unit("a"))
    with first.path.open("a", encoding="utf-8") as f:
        f.write(unit("b").to_json()[:25])  # the run stopped while writing b's line
    assert [u.files for u in finished_records(tmp_path, read=UnitRecord.from_json)] == [("a",)]
    Journal(tmp_path, 0).record(unit("b"))  # the resumed run
    assert sorted(u.files for u in finished_records(tmp_path, read=UnitRecord.from_json)) == [("a",), ("b",)]

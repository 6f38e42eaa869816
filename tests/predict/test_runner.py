"""The runner of every sharded run (`tphyolo.predict.runner.units`): units dealt k % world_size among those
left, records journaled as they finish and read back on resume (a bad line redone), and gathered on rank 0 in
unit order with those finished before -- for a raster's rows of tiles (`RowRecord`) as for a folder's units."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import torch
from tests.predict.runner_worker import ROWS, row_record
from tests.predict.runner_worker import main as runner_worker
from tests.torchrun import REPO, torchrun

from tphyolo.predict.raster import RowRecord
from tphyolo.predict.runner.journal import JOURNAL_DIR, FrameRecord, UnitRecord
from tphyolo.predict.runner.units import RunJournal, UnitRunner
from tphyolo.runtime.distributed import DistContext
from tphyolo.runtime.sharding import UnitDeal

WORKER = REPO / "tests" / "predict" / "runner_worker.py"


def rows_journal(run_dir: Path, *, resume: bool, notes: list[str] | None = None) -> RunJournal[RowRecord]:
    read = partial(RowRecord.from_json, classes=3)
    return RunJournal(run_dir, read=read, resume=resume, on_bad=None if notes is None else notes.append)


def test_units_left_are_dealt_round_robin_and_gathered_in_unit_order():
    shares = [UnitDeal.of(9, dist=DistContext(rank=r, world_size=3), done=[1, 4]) for r in range(3)]
    assert [s.mine for s in shares] == [(0, 5, 8), (2, 6), (3, 7)]  # of the units left: 0 2 3 5 6 7 8
    one = UnitDeal.of(5, done=[1, 3])
    assert one.gather(["u0", "u2", "u4"], before={1: "u1", 3: "u3"}) == (["u0", "u1", "u2", "u3", "u4"], [None])
    with pytest.raises(ValueError, match="item 2 came back twice"):
        one.gather(["u0", "u2", "u4"], before={1: "u1", 3: "u3", 2: "again"})
    with pytest.raises(ValueError, match="1 of 5 items did not come back"):
        one.gather(["u0", "u2", "u4"], before={1: "u1"})
    with pytest.raises(ValueError, match="rank 0: 2 results for 3 units"):
        one.gather(["u0", "u2"])


def test_a_resumed_run_of_raster_rows_runs_only_the_rows_not_journaled(tmp_path):
    first = UnitRunner(ROWS, journal=rows_journal(tmp_path, resume=False))
    for k in (0, 1, 2):
        first.finish(k, row_record(k))  # stopped after three rows
    with pytest.raises(ValueError, match="unit 3 of 4 left is not finished"):
        first.gather()
    journal = tmp_path / JOURNAL_DIR / "rank0.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text(f"{lines[0]}\n{lines[1][:30]}\n{lines[2]}\n{lines[0]}\n")  # row 1 cut short; row 0 twice
    notes: list[str] = []
    resumed = UnitRunner(ROWS, journal=rows_journal(tmp_path, resume=True, notes=notes))
    assert (sorted(resumed.before), resumed.left) == ([0, 2], (1, 3, 4, 5, 6))
    assert notes == [f"{journal}:2: not a whole JSON line (cut short?); its unit is redone"]
    for k in resumed.mine:
        resumed.finish(k, row_record(k))
    records, summaries = resumed.gather(summary="rank 0")
    assert [r.row for r in records] == ROWS and summaries == ["rank 0"]
    for record, k in zip(records, range(7), strict=True):
        assert torch.equal(record.rows, row_record(k).rows)  # float32, exactly, journaled or not
        assert (record.nodata, record.unreadable) == (k % 2, int(k == 4))
    new = UnitRunner(ROWS, journal=rows_journal(tmp_path, resume=False))  # a new run clears the journal
    assert (new.before, new.left) == ({}, tuple(range(7))) and not journal.exists()


def test_a_journal_line_of_another_kind_or_unit_is_redone(tmp_path):
    first = UnitRunner(ROWS, journal=rows_journal(tmp_path, resume=False))
    first.finish(0, row_record(0))
    first.finish(1, row_record(5))  # a journal line names its unit by its record: row 5
    other = UnitRecord(("a.jpg",), 1, 0, (FrameRecord("a.jpg", 0, "a", torch.zeros((1, 6))),))
    journal = tmp_path / JOURNAL_DIR / "rank0.jsonl"
    wrong_class = json.loads(row_record(3).to_json()) | {"rows": [[0, 0, 5, 5, 0.5, 7]]}
    journal.write_text(journal.read_text() + other.to_json() + "\n" + json.dumps(wrong_class) + "\n")
    notes: list[str] = []
    resumed = UnitRunner(ROWS[:3] + ROWS[4:], journal=rows_journal(tmp_path, resume=True, notes=notes))
    assert sorted(resumed.before) == [0, 4]  # ROWS[5] is unit 4 of this run
    assert [n.split(": ", 1)[1] for n in notes] == [
        "not a journal record (row, rows, nodata, unreadable); its unit is redone",
        f"a row of {ROWS[3]} has score 0.5 and class 7 (of 3); its unit is redone",
    ]
    with pytest.raises(ValueError, match="unit 0 is not one this rank has left to run"):
        resumed.finish(0, row_record(0))


def test_without_a_journal_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = UnitRunner(["a", "b"])
    runner.finish(0, row_record(0))
    runner.finish(1, row_record(1))
    assert runner.count(3) == 3 and runner.gather()[0][1].row == ROWS[1] and list(tmp_path.iterdir()) == []


@pytest.mark.slow  # two torchrun starts
def test_two_ranks_deal_journal_resume_and_gather_what_one_process_gathers(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for folder in (one, two, tmp_path / "out1", tmp_path / "out2", tmp_path / "out3"):
        folder.mkdir()
    runner_worker(str(one), str(tmp_path / "out1"), "-1", "0")
    torchrun(str(WORKER), str(two), str(tmp_path / "out2"), "1", "0")  # each rank stops after one row
    stopped = [json.loads((tmp_path / "out2" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["ran"] for s in stopped] == [[0], [1]] and not (tmp_path / "out2" / "gathered.json").exists()
    torchrun(str(WORKER), str(two), str(tmp_path / "out3"), "-1", "1")
    resumed = [json.loads((tmp_path / "out3" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert resumed[0]["before"] == [0, 1] and [r["ran"] for r in resumed] == [[2, 4, 6], [3, 5]]
    whole = json.loads((tmp_path / "out1" / "gathered.json").read_text())
    gathered = json.loads((tmp_path / "out3" / "gathered.json").read_text())
    assert gathered["records"] == whole["records"] and gathered["summaries"] == [0, 1] and gathered["count"] == 5
    assert sorted(p.name for p in (two / JOURNAL_DIR).iterdir()) == ["rank0.jsonl", "rank1.jsonl"]

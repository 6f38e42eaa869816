"""Run by test_runner.py under torchrun (or in one process) with RUN_DIR OUT STOP_AFTER RESUME: a UnitRunner over
seven raster rows (`RowRecord`, a row of tiles as a unit of its own) journaled in RUN_DIR; each rank finishes
at most STOP_AFTER of its rows (-1: all of them) and, when it finished all, joins the gather; rank 0 writes
what the run gathered to OUT/gathered.json and each rank what it ran to OUT/rankR.json. Not a test module."""

import json
import sys
from functools import partial
from pathlib import Path

import torch

from tphyolo.predict.raster import RowRecord
from tphyolo.predict.runner.units import RunJournal, UnitRunner
from tphyolo.runtime.distributed import DistContext, process_group

ROWS = [f"ortho.tif: rows {192 * k}-{192 * k + 256}, 4 tiles of 256 px" for k in range(7)]


def row_record(k: int) -> RowRecord:
    """Row k's record: k detections of class k % 3 (the same whoever runs it)."""
    rows = torch.tensor([[10.0 * i, 192.0 * k, 10.0 * i + 5, 192.0 * k + 5, 0.5, k % 3] for i in range(k)])
    return RowRecord(ROWS[k], rows.reshape(-1, 6), nodata=k % 2, unreadable=int(k == 4))


def main(run_dir: str, out: str, stop_after: str, resume: str) -> None:
    ctx = DistContext.from_env()
    with process_group(ctx, torch.device("cpu")):
        journal = RunJournal(Path(run_dir), read=partial(RowRecord.from_json, classes=3), resume=resume == "1")
        runner = UnitRunner(ROWS, dist=ctx, journal=journal)
        ran = list(runner.mine) if int(stop_after) < 0 else list(runner.mine)[: int(stop_after)]
        for k in ran:
            runner.finish(k, row_record(k))
            runner.count(1)
        done = {"before": sorted(runner.before), "left": list(runner.left), "ran": ran}
        (Path(out) / f"rank{ctx.rank}.json").write_text(json.dumps(done))
        if ran != list(runner.mine):
            return  # stopped: this process never reaches the gather
        gathered = runner.gather(summary=ctx.rank)
        if gathered is not None:
            records, summaries = gathered
            rows = [[r.row, r.rows.tolist(), r.nodata, r.unreadable] for r in records]
            text = json.dumps({"records": rows, "summaries": summaries, "count": runner.count(0)})
            (Path(out) / "gathered.json").write_text(text)


if __name__ == "__main__":
    main(*sys.argv[1:])

"""The table of a search, driven with stand-in trials: trials.csv follows the trials, one line per ended trial."""

from __future__ import annotations

import io
import math
from types import SimpleNamespace

from tphyolo.training.tune.space import HypRange, SearchSpace
from tphyolo.training.tune.trials import TrialRow, TrialTable, final_table, read_trials

SPACE = SearchSpace({"lr0": 0.01, "momentum": 0.9}, {"lr0": HypRange(1e-4, 0.1)})


def trial(number: int, lr0: float, **result) -> SimpleNamespace:
    return SimpleNamespace(config={"lr0": lr0, "trial": number}, last_result=result, error_file=None,
                           path="/x/trial{number}")  # fmt: skip


def report(fitness: float, epoch: int) -> dict:
    return {"fitness": fitness, "mAP50": fitness + 0.1, "mAP50-95": fitness - 0.01, "epoch": epoch}


def test_the_table_and_the_lines_follow_the_trials(tmp_path):
    table, out = tmp_path / "trials.csv", io.StringIO()
    earlier = [TrialRow(1, "done", 0.2, 0.3, 0.19, 2, {"lr0": 0.01, "momentum": 0.9})]
    reporter = TrialTable(table, space=SPACE, epochs=2, total=5, stream=out, rows=earlier)
    two, three, four = trial(2, 0.05), trial(3, 0.2), trial(4, 0.001)
    for t in (two, three, four):
        reporter.on_trial_start(0, [], t)
    assert [(r.trial, r.state, r.hyp["lr0"]) for r in read_trials(table)] == [
        (1, "done", 0.01), (2, "running", 0.05), (3, "running", 0.1), (4, "running", 0.001)]  # clipped  # fmt: skip
    reporter.on_trial_result(0, [], two, report(0.3, 1))
    two.last_result = report(0.4, 2)
    reporter.on_trial_complete(0, [], two)
    three.last_result = report(0.1, 1)
    reporter.on_trial_complete(0, [], three)  # ended after 1 of 2 epochs: stopped by the scheduler
    error = tmp_path / "staged" / "error.txt"
    error.parent.mkdir()
    error.write_text("Traceback (most recent call last):\n  ...\nValueError: lr0 too high\n\n")
    four.error_file, four.path = str(error), "/run/ray/session1/trial4"
    reporter.on_trial_error(0, [], four)
    rows = {r.trial: r for r in read_trials(table)}
    assert (rows[2].state, rows[2].fitness, rows[2].map50, rows[2].epochs) == ("done", 0.4, 0.5, 2)
    assert (rows[3].state, rows[3].epochs) == ("stopped", 1) and rows[4].state == "error"
    assert math.isnan(rows[4].fitness)
    assert out.getvalue().splitlines() == [
        "trial   2/5  done     fitness 0.4000  mAP50 0.5000  mAP50-95 0.3900  2 epoch(s)",
        "trial   3/5  stopped  fitness 0.1000  mAP50 0.2000  mAP50-95 0.0900  1 epoch(s)",
        "trial   4/5  error    fitness nan  mAP50 nan  mAP50-95 nan  0 epoch(s)  ValueError: lr0 too high "
        "(/run/ray/session1/trial4/error.txt)",
    ]
    reporter.on_trial_start(0, [], trial(5, 0.02))
    reporter.interrupted()
    assert read_trials(table)[-1].state == "interrupted"
    assert "stream" not in reporter.__getstate__()


def test_the_final_table_ranks_by_fitness_and_says_what_it_leaves_out():
    rows = [TrialRow(i, "done", f, f, f, 2, {}) for i, f in enumerate([0.1, math.nan, 0.3, 0.2], start=1)]
    lines = final_table(rows, most=2).splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["3", "4"] and lines[3] == "(2 more in trials.csv)"

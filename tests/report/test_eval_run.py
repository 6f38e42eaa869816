"""`run_eval` from Python, without the command line: saved detections give the protocol's numbers (and the json),
`save_gt` alone writes the COCO ground truth, saved tracks equal to their truth score 100, an analyze run's true
counts score no error and one bus too many one; settings that do not go together are refused when the job is
made, in the flags' words."""

import json
import re

import pytest
import yaml
from tests.analyze.simulated import LINES, Truth, simulate
from tests.commands.test_eval_cmd import _dataset

from tphyolo.analyze.scoring import true_counts
from tphyolo.data.mot.visdrone_mot import write_visdrone_mot
from tphyolo.evaluation.jobs import EvalJob
from tphyolo.report.eval_run import run_eval


@pytest.fixture(scope="module")
def tracks(tmp_path_factory):
    """(folder of a simulated sequence's true tracks seq.txt, lines yaml)."""
    root = tmp_path_factory.mktemp("eval_run")
    write_visdrone_mot(root / "tracks" / "seq.txt", Truth(simulate()).rows)
    lines = root / "lines.yaml"
    lines.write_text(yaml.safe_dump({"lines": [{"name": n, "points": p} for n, p in LINES]}))
    return root / "tracks", lines


def test_saved_detections_give_the_protocols_numbers_and_the_json(tmp_path):
    root = _dataset(tmp_path)
    out = tmp_path / "out" / "res.json"
    run = run_eval(EvalJob(gt=str(root / "annotations"), pred=str(root / "pred"), json=str(out)))
    assert run.numbers["AP"] == pytest.approx(85.0) and run.numbers["per_class"]["car"]["AP"] == pytest.approx(100.0)
    assert "pedestrian" in run.table and run.report is None and run.saved_gt is None
    assert json.loads(out.read_text()) == run.numbers


def test_save_gt_alone_writes_the_coco_ground_truth_and_scores_nothing(tmp_path):
    root = _dataset(tmp_path)
    run = run_eval(EvalJob(gt=root / "annotations", save_gt=tmp_path / "gt.json"))
    assert run.table is None and run.numbers is None
    assert run.saved_gt.path == tmp_path / "gt.json" and run.saved_gt.images == 1
    assert len(json.loads((tmp_path / "gt.json").read_text())["images"]) == 1


def test_tracks_equal_to_their_truth_score_100(tracks, tmp_path):
    folder, _ = tracks
    run = run_eval(EvalJob(task="track", gt=folder, pred=folder, json=tmp_path / "track.json"))
    assert run.numbers["combined"]["HOTA"] == pytest.approx(100.0) and run.numbers["combined"]["IDSW"] == 0
    assert run.table.splitlines()[0].split()[:2] == ["class", "HOTA"]
    assert json.loads((tmp_path / "track.json").read_text())["combined"]["HOTA"] == pytest.approx(100.0)


def test_counts_are_scored_against_those_of_the_true_tracks(tracks, tmp_path):
    folder, lines = tracks
    counts = true_counts(folder, lines)["seq"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "counts.json").write_text(json.dumps(counts))
    job = EvalJob(task="count", gt=folder, pred=run_dir, lines=str(lines))
    total = sum(sum(c.values()) for per in counts["lines"].values() for c in per.values())
    numbers = run_eval(job).numbers
    assert numbers["error"] == 0 and numbers["true"] == total > 0
    forward = counts["lines"]["h"]["forward"]
    counts["lines"]["h"]["forward"] = {**forward, "bus": forward.get("bus", 0) + 1}
    (run_dir / "counts.json").write_text(json.dumps(counts))
    assert run_eval(job).numbers["error"] == 1


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({}, "--gt is required"),
        ({"gt": "annotations"}, "--pred is required (unless --save-gt only writes the ground truth)"),
        ({"gt": "gt.json", "save_gt": "out.json"}, "--save-gt writes the COCO json of a VisDrone annotation folder"),
        ({"task": "track", "pred": "p", "gt": "g", "protocol": "coco"}, "--protocol score detections"),
        ({"task": "track", "pred": "p", "gt": "g", "data": "d"}, "--task track needs --pred and one of --gt or --data"),
        ({"task": "count", "pred": "p", "gt": "g"}, "--task count needs --pred (an analyze run)"),
        ({"task": "classify"}, "--task must be one of"),
    ],
)
def test_settings_that_do_not_go_together_are_refused(settings, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        EvalJob(**settings)

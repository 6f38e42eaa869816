"""`run_analyze` from Python, without the command line: a job of a synthetic-mot sequence's true tracks with its
frames counts what the straight-path oracle counts, and a job with two inputs is refused."""

import json
import re

import pytest
from tests.analyze.simulated import LENGTH, Truth, expected_counts, record, simulate

from tphyolo.analyze.config import AnalyzeConfig, AnalyzeInputs, AnalyzeOutputs
from tphyolo.analyze.job import AnalyzeJob
from tphyolo.analyze.pipeline import run_analyze
from tphyolo.runtime.run_dir import OutputDir
from tphyolo.track.job import TRACK_CONF


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    truth = Truth(simulate(draw=True))
    tracks, frames, lines = record(truth, tmp_path_factory.mktemp("analyze_job"))
    return truth, tracks, frames / "seq", lines


def test_a_job_of_true_tracks_counts_as_the_oracle(recorded, tmp_path):
    truth, tracks, frames, lines = recorded
    job = AnalyzeJob(AnalyzeInputs(lines=str(lines), source=str(frames), tracks=tracks),
                     config=AnalyzeConfig(fps=25), outputs=AnalyzeOutputs(save_video=False),
                     output=OutputDir(project=str(tmp_path), name="run"))  # fmt: skip
    run = run_analyze(job, progress=False)
    assert run.save_dir == tmp_path / "run"
    assert [report.name for report in run.reports] == ["seq"] and run.reports[0].frames == LENGTH
    counts = json.loads((run.save_dir / "counts.json").read_text())
    assert counts["lines"] == run.reports[0].counts["lines"] == expected_counts(truth)
    assert not (run.save_dir / "seq.mp4").exists()
    summary = run.summary().splitlines()
    assert summary[0].startswith(f"seq: {LENGTH} frames") and summary[-1] == f"results in {run.save_dir}"


def test_the_detector_of_a_job_keeps_the_weak_detections_the_tracker_uses(recorded):
    _, tracks, _, lines = recorded
    assert AnalyzeJob(AnalyzeInputs(lines=str(lines), tracks=tracks)).inference.conf == TRACK_CONF == 0.1


@pytest.mark.parametrize(
    ("inputs", "problem"),
    [
        ({}, "give one of --weights (with --source), --detections or --tracks"),
        ({"detections": "dets", "tracks": "tracks"}, "give one of --weights (with --source), --detections or --tracks"),
        ({"weights": ("best.pt",)}, "--weights needs --source"),
    ],
)
def test_the_one_input_rule_refuses_the_inputs_of_a_job(recorded, inputs, problem):
    _, _, _, lines = recorded
    with pytest.raises(ValueError, match=re.escape(problem)):
        AnalyzeInputs(lines=str(lines), **inputs)

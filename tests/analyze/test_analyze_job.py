"""`run_analyze` from Python, without the command line: a job of a synthetic-mot sequence's true tracks with its
frames counts what the straight-path oracle counts, and a job with two inputs is refused."""

import json
import re

import pytest
from tests.analyze.simulated import LENGTH, Truth, expected_counts, record, simulate

from tphyolo.analyze.config import AnalyzeConfig, AnalyzeInputs, AnalyzeOutputs
from tphyolo.analyze.job import AnalyzeJob
from tphyolo.analyze.pipeline import run_analyze
from tphyolo.cli import build_parser
from tphyolo.commands import analyze as analyze_command
from tphyolo.infer.slicing import SliceConfig
from tphyolo.infer.spec import DetectorSpec
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
    run = run_analyze(job)
    assert run.save_dir == tmp_path / "run"
    assert [report.name for report in run.reports] == ["seq"] and run.reports[0].frames == LENGTH
    counts = json.loads((run.save_dir / "counts.json").read_text())
    assert counts["lines"] == run.reports[0].counts["lines"] == expected_counts(truth)
    assert not (run.save_dir / "seq.mp4").exists()
    summary = run.summary().splitlines()
    assert summary[0].startswith(f"seq: {LENGTH} frames") and summary[-1] == f"results in {run.save_dir}"


def test_the_detector_of_the_command_keeps_the_weak_detections_the_tracker_uses(recorded):
    _, _, frames, lines = recorded
    argv = ["analyze", "--lines", str(lines), "--weights", "best.pt", "--source", str(frames), "--slice", "256"]
    job = analyze_command._job(build_parser(["analyze"]).parse_args(argv))
    assert job.detector.inference.conf == TRACK_CONF == 0.1 and job.detector.weights == ("best.pt",)
    assert job.detector.slicing == SliceConfig(256)


@pytest.mark.parametrize(
    ("inputs", "problem"),
    [
        ({}, "give one of --weights (with --source), --detections or --tracks"),
        ({"detections": "dets", "tracks": "tracks"}, "give one of --weights (with --source), --detections or --tracks"),
        ({"detector": DetectorSpec(("best.pt",))}, "--weights needs --source"),
        ({"detector": DetectorSpec(("best.pt",)), "tracks": "tracks"}, "give one of --weights (with --source)"),
    ],
)
def test_the_one_input_rule_refuses_the_inputs_of_a_job(recorded, inputs, problem):
    _, _, _, lines = recorded
    detector = inputs.pop("detector", None)
    with pytest.raises(ValueError, match=re.escape(problem)):
        AnalyzeJob(AnalyzeInputs(lines=str(lines), **inputs), detector)

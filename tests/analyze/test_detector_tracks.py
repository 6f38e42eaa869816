"""`tphyolo.analyze.analyze` on a detector's stream: a detector that knows the answer (the true boxes of each
frame, `tests/track/oracle.py`) tracked by ByteTrack with sparse camera-motion compensation, on a generated
synthetic-mot sequence; its counts scored against those of the ground-truth tracks (`eval --task count`'s
library)."""

import pytest
import yaml
from tests.analyze.simulated import LINES
from tests.track.oracle import OraclePredictor

from tphyolo.analyze import AnalyzeInput, analyze, read_counts, score_counts, true_counts
from tphyolo.data.builtin.synthetic_mot import generate_synthetic_mot
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.mot.sequences import tracking_split
from tphyolo.track.tracker import ByteTracker


@pytest.mark.slow
def test_counts_from_the_detector_and_tracker_are_within_5_percent(tmp_path):
    split = tracking_split(load_data_config(generate_synthetic_mot(tmp_path / "set", n_train=0, n_val=1, length=60)))
    lines = tmp_path / "lines.yaml"
    lines.write_text(yaml.safe_dump({"lines": [{"name": n, "points": p} for n, p in LINES],
                                     "zones": [{"name": "centre", "points": [[220, 120], [420, 120], [420, 264],
                                                                            [220, 264]]}]}))  # fmt: skip
    frames = split.sequences["val-000"]
    reports = analyze(lines, tmp_path / "run", AnalyzeInput(predictor=OraclePredictor(split), source=frames),
                      tracker=ByteTracker("bytetrack", cmc="sparse"), save_video=False, progress=False)  # fmt: skip
    assert [r.frames for r in reports] == [60]
    truth = true_counts(split.annotations, lines, source=frames)
    score = score_counts(truth, read_counts(tmp_path / "run"))
    assert score.true_total >= 8 and score.error_rate <= 0.05, score.table()

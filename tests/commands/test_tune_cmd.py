"""`tphyolo tune --resume` from the command line: the saved settings are kept, and a search whose trials have
all ended only writes its outputs again (Ray is not started). The searches themselves run in
tests/training/tune/test_tune_search.py."""

from __future__ import annotations

import pytest
import yaml

pytest.importorskip("ray.tune")

from tphyolo.cli import main  # noqa: E402
from tphyolo.training.config import TrainConfig  # noqa: E402
from tphyolo.training.hyp import load_hyp, train_hyp  # noqa: E402
from tphyolo.training.tune.config import TuneConfig  # noqa: E402
from tphyolo.training.tune.trials import TrialRow, read_trials, write_trials  # noqa: E402


@pytest.fixture
def ended_search(tiny_synthetic, tmp_path):
    """A search folder of two ended trials (trial 2 the fitter), as an interrupted `tune` leaves it."""
    run_dir = tmp_path / "exp"
    run_dir.mkdir()
    settings = {"tune": TuneConfig(trials=2).to_dict(), "train": TrainConfig(data=str(tiny_synthetic),
                                                                            hyp="synthetic").to_dict()}  # fmt: skip
    (run_dir / "tune.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    hyp = load_hyp("synthetic")
    rows = [TrialRow(1, "done", 0.2, 0.3, 0.1889, 2, hyp),
            TrialRow(2, "stopped", 0.3, 0.4, 0.2889, 1, hyp | {"lr0": hyp["lr0"] / 2})]  # fmt: skip
    write_trials(run_dir / "trials.csv", rows)
    return run_dir, rows


def test_resume_refuses_new_settings(ended_search, capsys):
    run_dir, _ = ended_search
    assert main(["tune", "--resume", str(run_dir), "--epochs", "5", "--searcher", "tpe"]) == 2
    assert capsys.readouterr().err.rstrip().endswith("saved settings; drop --searcher, --epochs")


def test_resuming_an_ended_search_writes_its_outputs(ended_search, capsys):
    import ray

    run_dir, rows = ended_search
    assert main(["tune", "--resume", str(run_dir), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"best: trial 2, fitness 0.3000; hyp in {run_dir / 'best_hyp.yaml'}"
    assert not ray.is_initialized()  # nothing was left to run
    assert train_hyp(run_dir / "best_hyp.yaml") == dict(rows[1].hyp)
    assert read_trials(run_dir / "trials.csv") == rows and (run_dir / "trials.png").is_file()

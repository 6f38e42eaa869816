"""Searches on a local Ray cluster: a real one (4 trials x 2 epochs of the trainer on synthetic scenes), and
searches whose trials report made-up fitness, for what depends on the numbers (ASHA stopping, resuming)."""

from __future__ import annotations

import io
import sys
from dataclasses import replace

import pytest
import ray
import ray.cloudpickle
from ray import tune as ray_tune

from tphyolo.cli import main
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.hyp import train_hyp
from tphyolo.training.tune.config import TuneConfig
from tphyolo.training.tune.search import run_search
from tphyolo.training.tune.trainable import ReportToTune, trial_config
from tphyolo.training.tune.trials import read_trials, write_trials
from tphyolo.yaml_files import load_yaml_file

pytestmark = pytest.mark.slow
CPU = RuntimeConfig(device="cpu")


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray cluster of 2 CPUs for the module (a search uses a running one and leaves it running)."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # trial processes need not import tests.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def made_up_trial(config, *, setup):
    """Three epochs whose mAPs are made of the trial's hyp values: 0.1 lr0-weighted growth per epoch."""
    cfg = trial_config(setup, int(config["trial"]), {k: v for k, v in config.items() if k != "trial"})
    hyp = load_yaml_file(cfg.hyp)
    hook = ReportToTune(ray_tune.report)
    for epoch in range(setup.train.epochs):
        value = min(hyp["lr0"] * 30 * (epoch + 1) / setup.train.epochs, 1.0)
        hook.after_epoch(None, epoch, {"metrics/mAP50": value, "metrics/mAP50-95": value / 2})


def made_up_search(tmp_path, **tune_settings) -> tuple[TuneConfig, TrainConfig]:
    tune = TuneConfig(project=str(tmp_path), name="s", cpus_per_trial=2, **tune_settings)  # one trial at a time
    return tune, TrainConfig(data="synthetic", epochs=3, seed=3)


def test_asha_stops_the_trials_that_trail(ray_session, tmp_path):
    tune, train = made_up_search(tmp_path, trials=8, scheduler="asha", searcher="random")
    result = run_search(tune, train, CPU, stream=io.StringIO(), trainable=made_up_trial)
    rows = result.trials
    assert [r.trial for r in rows] == list(range(1, 9))
    stopped = [r for r in rows if r.state == "stopped"]
    assert stopped and all(r.epochs < 3 for r in stopped) and any(r.state == "done" and r.epochs == 3 for r in rows)
    best = max(rows, key=lambda r: r.fitness)
    assert result.best_hyp == dict(best.hyp) and best.state == "done"
    assert best.fitness == pytest.approx(0.1 * best.map50 + 0.9 * best.map50_95)


def test_a_resumed_search_keeps_its_trials_and_runs_the_missing_ones(ray_session, tmp_path):
    tune, train = made_up_search(tmp_path, trials=3)
    first = run_search(tune, train, CPU, stream=io.StringIO(), trainable=made_up_trial)
    run_dir = first.run_dir
    rows = read_trials(run_dir / "trials.csv")
    write_trials(run_dir / "trials.csv", [*rows[:2], replace(rows[2], state="running", epochs=1)])  # stopped there
    out = io.StringIO()
    resumed = run_search(None, None, CPU, resume=run_dir, stream=out, trainable=made_up_trial)
    states = [(r.trial, r.state) for r in resumed.trials]
    assert states == [(1, "done"), (2, "done"), (3, "interrupted"), (4, "done")]
    assert resumed.trials[:2] == rows[:2] and out.getvalue().startswith("trial   4/3  done")
    assert resumed.trials[3].hyp != rows[0].hyp  # evolved from the two finished trials, not the hyp file again
    more = run_search(TuneConfig(trials=4), None, CPU, resume=run_dir, stream=io.StringIO(), trainable=made_up_trial)
    assert [r.trial for r in more.trials] == [1, 2, 3, 4, 5]


def test_four_trials_of_two_epochs_end_with_a_hyp_file_train_reads(ray_session, tiny_synthetic, tmp_path, capsys):
    argv = ["tune", "--data", str(tiny_synthetic), "--img", "64", "--batch", "4", "--epochs", "2", "--trials", "4",
            "--scheduler", "asha", "--workers", "0", "--no-plots", "--device", "cpu",
            "--project", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    run_dir = tmp_path / "exp"
    assert sum(line.startswith("trial ") and "/4  " in line for line in out) == 4  # a line per trial, no Ray noise
    assert out[-1].startswith("best: trial ") and out[-1].endswith(str(run_dir / "best_hyp.yaml"))
    rows = read_trials(run_dir / "trials.csv")
    assert [r.trial for r in rows] == [1, 2, 3, 4] and {r.state for r in rows} <= {"done", "stopped"}
    assert all(r.epochs in (1, 2) for r in rows)
    best = max(rows, key=lambda r: r.fitness)
    assert train_hyp(run_dir / "best_hyp.yaml") == dict(best.hyp)  # what `train --hyp` reads
    assert (run_dir / "trials.png").is_file() and (run_dir / "ray.log").stat().st_size > 0
    for row in rows:
        folder = run_dir / "trials" / f"trial{row.trial}"
        assert load_yaml_file(folder / "hyp.yaml") == dict(row.hyp) and (folder / "weights" / "last.pt").is_file()


def test_without_ray_tune_the_command_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray.tune", None)
    assert main(["tune", "--trials", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.endswith('install the extra: pip install -e ".[tune]"')

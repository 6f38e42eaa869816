"""trials.csv, the history a resumed search learns from, best_hyp.yaml and trials.png."""

from __future__ import annotations

import math

import pytest

from tphyolo.training.tune.searchers import Scored
from tphyolo.training.tune.trials import (
    TrialRow,
    best_trial,
    history,
    plot_trials,
    read_trials,
    write_best_hyp,
    write_trials,
)
from tphyolo.yaml_files import load_yaml_file

HYP = {"lr0": 0.01, "momentum": 0.937, "anchor_t": 4.0, "anchors": 3}
NAN = math.nan


def rows() -> list[TrialRow]:
    return [
        TrialRow(3, "stopped", 0.21, 0.4, 0.19, 1, {**HYP, "lr0": 0.02}),
        TrialRow(1, "done", 0.30, 0.5, 0.2777777777777778, 2, HYP),
        TrialRow(2, "error", NAN, NAN, NAN, 0, {**HYP, "lr0": 0.05}),
        TrialRow(4, "interrupted", 0.5, 0.6, 0.4888888888888889, 1, {**HYP, "momentum": 0.9}),
        TrialRow(5, "done", 0.25, 0.45, 0.2277777777777778, 2, {**HYP, "lr0": 1e-05}),
    ]


def test_the_table_round_trips_in_trial_order(tmp_path):
    path = tmp_path / "trials.csv"
    write_trials(path, rows())
    assert path.read_text().splitlines()[0] == "trial,state,fitness,mAP50,mAP50-95,epochs,lr0,momentum,anchor_t,anchors"
    back = read_trials(path)
    assert [r.trial for r in back] == [1, 2, 3, 4, 5]
    expected = sorted(rows(), key=lambda r: r.trial)
    for ours, theirs in zip(back, expected, strict=True):
        assert (ours.trial, ours.state, ours.epochs, dict(ours.hyp)) == (theirs.trial, theirs.state, theirs.epochs,
                                                                          dict(theirs.hyp))  # fmt: skip
        assert ours.map50_95 == theirs.map50_95 or (math.isnan(ours.map50_95) and math.isnan(theirs.map50_95))
    assert type(back[0].hyp["anchors"]) is int and type(back[0].hyp["anchor_t"]) is float
    assert not list(tmp_path.glob(".*tmp"))


def test_a_resumed_search_learns_from_finished_trials_only():
    assert history(rows(), ["lr0"]) == [Scored({"lr0": 0.02}, 0.21), Scored({"lr0": 0.01}, 0.30),
                                        Scored({"lr0": 1e-05}, 0.25)]  # fmt: skip
    assert best_trial(rows()).trial == 1  # trial 4 scored more, but was interrupted
    assert best_trial([rows()[2]]) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n", "not a trials table"),
        ("trial,state,fitness,mAP50,mAP50-95,epochs,lr0\n1,done,0.3,0.5,0.2,2\n", ":2: 6 fields, expected 7"),
        ("trial,state,fitness,mAP50,mAP50-95,epochs,lr0\n1,won,0.3,0.5,0.2,2,0.01\n", ":2: trial 1: unknown state"),
        ("trial,state,fitness,mAP50,mAP50-95,epochs,lr0\n1,done,x,0.5,0.2,2,0.01\n", ":2: could not convert"),
    ],
)
def test_a_bad_table_is_refused_naming_file_and_line(tmp_path, text, message):
    path = tmp_path / "trials.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        read_trials(path)
    assert str(error.value).startswith(str(path))


def test_best_hyp_is_a_hyp_file_with_the_best_trials_values(tmp_path):
    path = tmp_path / "best_hyp.yaml"
    write_best_hyp(path, best_trial(rows()), base="hyp.scratch-low.yaml")
    assert load_yaml_file(path) == HYP
    assert path.read_text().startswith("# Best of a hyperparameter search from hyp.scratch-low.yaml: trial 1, fitness")


def test_the_plot_has_a_panel_per_searched_key(tmp_path):
    from PIL import Image

    path = plot_trials(rows(), ["lr0", "momentum"], tmp_path / "trials.png")
    one = plot_trials(rows(), ["lr0"], tmp_path / "one.png")
    with Image.open(path) as wide, Image.open(one) as narrow:
        assert wide.width > narrow.width * 1.4  # three panels against two
    assert plot_trials(rows()[2:3], ["lr0"], tmp_path / "none.png") is None and not (tmp_path / "none.png").exists()

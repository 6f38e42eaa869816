"""The Python API: `tphyolo.train(...)` reports like the CLI unless told not to, and always writes best.pt."""

import logging

import pytest

import tphyolo
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.console import progress_output
from tphyolo.training.trainer import Trainer


def _tiny(data, tmp_path, name):
    return dict(data=str(data), imgsz=64, batch=4, epochs=1, workers=0, plots=False, warmup_min_steps=1,
                project=str(tmp_path), name=name, runtime=RuntimeConfig(device="cpu"))  # fmt: skip


@pytest.mark.slow
def test_train_reports_progress_by_default_and_writes_best_even_without_a_gain(
    tiny_synthetic, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(Trainer, "validate", lambda self: {"metrics/mAP50": 0.0, "metrics/mAP50-95": 0.0})
    result = tphyolo.train(**_tiny(tiny_synthetic, tmp_path, "loud"))
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].startswith("recipe: synthetic (hyp synthetic, AdamW, nbs ")  # nbs fit to this tiny set
    assert any(line.startswith("epoch 1/1  loss ") for line in lines)
    assert "epoch 1/1" in out.err  # the progress bar
    assert result.best_fitness == 0.0 and result.best.is_file()  # fitness never rose: best.pt all the same


@pytest.mark.slow
def test_verbose_false_is_silent_and_logging_is_left_as_it_was(tiny_synthetic, tmp_path, capsys):
    logger = logging.getLogger("tphyolo")
    before = (logger.level, list(logger.handlers))
    result = tphyolo.train(**_tiny(tiny_synthetic, tmp_path, "quiet"), verbose=False)
    out = capsys.readouterr()
    assert out.out == "" and "epoch" not in out.err
    assert result.best.is_file() and (logger.level, list(logger.handlers)) == before


def test_a_caller_whose_logging_shows_info_keeps_it(capsys):
    root = logging.getLogger()
    handler, level = logging.StreamHandler(), root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        with progress_output(True):
            assert logging.getLogger("tphyolo").handlers == []
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    with progress_output(True):
        logging.getLogger("tphyolo.train").info("shown")
    logging.getLogger("tphyolo.train").info("not shown after")
    assert capsys.readouterr().out == "shown\n"


def test_a_line_logged_while_a_progress_bar_runs_gets_a_line_of_its_own(capsys):
    import sys

    from tqdm import tqdm

    with progress_output(True):
        bar = tqdm(total=3, desc="epoch 1/3", file=sys.stdout)  # on one stream with the log, as on a terminal
        bar.update(1)
        logging.getLogger("tphyolo.train").info("time to first step 1.23 s")
        bar.update(1)
        bar.close()
    out = capsys.readouterr().out
    (line,) = [line for line in out.split("\n") if "time to first step" in line]
    assert line.split("\r")[-1] == "time to first step 1.23 s"  # the bar was cleared before, not written before
    assert "epoch 1/3" in out.split("time to first step")[1]  # and drawn again after

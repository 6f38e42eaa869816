"""Faults during training: a run stopped at each write point of an epoch resumes into one consistent record.

The write points of an epoch, in order: its results.csv row, `last.pt` (which commits the epoch), `best.pt`.
A stop is injected as an exception that nothing in the trainer catches (as a kill or Ctrl-C would end it), and,
for a kill inside the save of `last.pt`, as the temporary file such a kill leaves behind. After the last epoch,
the run's end (best.pt, the final validation, the plots, last.pt stripped) is finished by a resume that trains no
epoch; once it is done, there is nothing to resume.
"""

import errno
import logging
import os

import pytest

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training import run_end as run_end_module
from tphyolo.training import trainer as trainer_module
from tphyolo.training.config import TrainConfig
from tphyolo.training.log import TrainLog, read_results
from tphyolo.training.trainer import Trainer

CPU = RuntimeConfig(device="cpu")
FITNESS = {0: 0.3, 1: 0.5, 2: 0.1}  # epoch 1 is the best one


class Stop(BaseException):
    """The process ends here (kill -9, Ctrl-C, disk full)."""


class ScriptedTrainer(Trainer):
    """Validation returns the scripted fitness of the epoch (mAP50 = mAP50-95 = fitness)."""

    def _run_epoch(self, epoch, log):
        self.epoch_now = epoch
        return super()._run_epoch(epoch, log)

    def validate(self):
        value = FITNESS[self.epoch_now]
        return {"metrics/mAP50": value, "metrics/mAP50-95": value}


def _inject(monkeypatch, point: str) -> None:
    """Stop the run at `point` of epoch 1: after its csv row, inside or after its last.pt save, after best.pt."""
    log = TrainLog.log

    def log_then_stop(self, epoch, values):
        log(self, epoch, values)
        if point == "csv" and epoch == 1:
            raise Stop

    save = trainer_module.save_checkpoint

    def save_then_stop(path, payload):
        if payload["epoch"] == 1 and path.name == "last.pt" and point == "inside-last":
            path.with_name(".last.4194305.tmp.pt").write_bytes(b"PK\x03\x04 half a checkpoint")  # a dead PID
            raise Stop
        written = save(path, payload)
        if payload["epoch"] == 1 and path.name == {"last": "last.pt", "best": "best.pt"}.get(point):
            raise Stop
        return written

    monkeypatch.setattr(TrainLog, "log", log_then_stop)
    monkeypatch.setattr(trainer_module, "save_checkpoint", save_then_stop)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["csv", "inside-last", "last", "best"])
def test_a_run_stopped_at_any_write_point_resumes_into_one_record(point, tiny_synthetic, tmp_path, monkeypatch):
    cfg = TrainConfig(
        data=str(tiny_synthetic), imgsz=64, batch=8, epochs=3, workers=0, project=str(tmp_path), name="run",
        plots=False, autoanchor=False, warmup_min_steps=0, save_period=2,
    )  # fmt: skip
    with monkeypatch.context() as patch:
        _inject(patch, point)
        with pytest.raises(Stop):
            ScriptedTrainer(cfg, CPU).fit()
    weights = tmp_path / "run" / "weights"
    committed = 1 if point in ("last", "best") else 0
    assert load_checkpoint(weights / "last.pt").state["epoch"] == committed

    result = ScriptedTrainer.resume(weights / "last.pt", CPU).fit()
    assert result.run_dir == tmp_path / "run"
    columns = read_results(result.run_dir / "results.csv")
    assert columns["epoch"] == [0.0, 1.0, 2.0]
    assert columns["metrics/mAP50"] == pytest.approx([FITNESS[0], FITNESS[1], FITNESS[2]])
    last, best = load_checkpoint(weights / "last.pt"), load_checkpoint(weights / "best.pt")
    assert last.state["epoch"] == 2 and best.state["epoch"] == 1
    assert load_checkpoint(weights / "epoch2.pt").state["epoch"] == 1  # written after best.pt, every 2 epochs
    assert last.state["best_fitness"] == best.state["best_fitness"] == pytest.approx(FITNESS[1])
    assert not list(weights.glob(".*.tmp*")), "temporary files of the interrupted save remain"


def test_results_rows_after_the_resumed_epoch_and_torn_rows_are_dropped(tmp_path):
    csv_path = tmp_path / "results.csv"
    csv_path.write_text("epoch,a,b\n0,1,2\n1,3,4\n2,5,6\n3,7")
    log = TrainLog(tmp_path, start_epoch=2, tensorboard=False)
    log.log(2, {"a": 9.0, "b": 9.0})
    assert csv_path.read_text().splitlines() == ["epoch,a,b", "0,1,2", "1,3,4", "2,9,9"]


def test_a_fresh_run_in_a_reused_folder_starts_a_new_results_file(tmp_path):
    (tmp_path / "results.csv").write_text("epoch,a\n0,1\n1,2\n")
    log = TrainLog(tmp_path, start_epoch=0, tensorboard=False)
    log.log(0, {"a": 5.0, "c": 6.0})
    assert (tmp_path / "results.csv").read_text().splitlines() == ["epoch,a,c", "0,5,6"]


def _end_fault(monkeypatch, fault: str) -> None:
    """Stop a run after its last epoch: best.pt on a full disk, Ctrl-C in the final validation, or last.pt's
    strip (the last act) on a full disk."""
    save, strip = trainer_module.save_checkpoint, run_end_module.strip_for_release
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def save_all_but_best(path, payload):
        if path.name == "best.pt":
            raise full
        return save(path, payload)

    def interrupted(self, best):
        raise KeyboardInterrupt

    def strip_all_but_last(path):
        if path.name == "last.pt":
            raise full
        return strip(path)

    target, name, replacement = {
        "best.pt": (trainer_module, "save_checkpoint", save_all_but_best),
        "validation": (Trainer, "_final_validation", interrupted),
        "last.pt strip": (run_end_module, "strip_for_release", strip_all_but_last),
    }[fault]
    monkeypatch.setattr(target, name, replacement)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["best.pt", "validation", "last.pt strip"])
def test_a_run_stopped_after_its_last_epoch_is_finished_by_resume(fault, tiny_synthetic, tmp_path, monkeypatch, caplog):
    """Before: the resume said "nothing to resume", and best.pt, the final validation and the strip never came."""
    cfg = TrainConfig(
        data=str(tiny_synthetic), imgsz=64, batch=8, epochs=1, workers=0, project=str(tmp_path), name="run",
        autoanchor=False, warmup_min_steps=0,
    )  # fmt: skip
    with monkeypatch.context() as patch:
        _end_fault(patch, fault)
        with pytest.raises((OSError, KeyboardInterrupt)):
            Trainer(cfg, CPU).fit()
    run = tmp_path / "run"
    last = run / "weights" / "last.pt"
    assert "optimizer" in load_checkpoint(last).state
    figures = ("results.png", "confusion_matrix.png", "val_batch0_pred.jpg")
    for name in figures:
        (run / name).unlink(missing_ok=True)

    def no_epoch(self, epoch, log):
        raise AssertionError(f"the resume trained epoch {epoch}")

    monkeypatch.setattr(Trainer, "_run_epoch", no_epoch)
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        result = Trainer.resume(last, CPU, verbose=False).fit()
    assert f"finishing {last}: its epochs are trained (1 of 1)" in caplog.text
    assert f"validating {result.best}" in caplog.text and "Class" in caplog.text  # the final table
    assert result.epochs_run == 0 and set(result.final_metrics) >= {"metrics/mAP50", "metrics/mAP50-95"}
    assert read_results(run / "results.csv")["epoch"] == [0.0]
    assert all((run / name).is_file() for name in figures)
    for path in (result.last, result.best):
        ckpt = load_checkpoint(path)
        assert ckpt.state["epoch"] == 0 and "optimizer" not in ckpt.state and ckpt.ema is None
    with pytest.raises(ValueError, match=f"^{last}: the run already finished its 1 epochs; nothing to resume$"):
        Trainer.resume(last, CPU, verbose=False)

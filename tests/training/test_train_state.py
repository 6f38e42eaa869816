"""A run's resume state: malformed entries of last.pt are named or recovered from, paths survive a move of
the working folder, settings out of range are refused by their flag."""

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tphyolo.checkpoint.format import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.hyp import load_hyp
from tphyolo.training.model.setup import check_freeze
from tphyolo.training.optim.optimization import build_optimization
from tphyolo.training.rng import rng_state
from tphyolo.training.state import (
    pending_gradients,
    read_progress,
    reconcile_weights,
    release_payload,
    restore_gradients,
    restore_training,
    resume_config,
    with_resolved_paths,
)
from tphyolo.training.trainer import Trainer

CPU = RuntimeConfig(device="cpu")


def _optimization():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Conv2d(4, 2, 1))
    return build_optimization(
        TrainConfig(optimizer="AdamW", nominal_batch=8), model, load_hyp("synthetic"), batches_per_epoch=2,
        world_size=1, with_ema=True, runtime=CPU, device=torch.device("cpu"),
    )  # fmt: skip


def _checkpoint(tmp_path: Path, **state) -> Checkpoint:
    optim = _optimization()
    good = {
        "optimizer": optim.optimizer.state_dict(), "scheduler": optim.scheduler.state_dict(),
        "scaler": optim.scaler.state_dict(), "epoch": 2, "best_fitness": 0.4, "ema_updates": 7,
        "train_args": {**TrainConfig().to_dict(), "_progress": {"step": 6, "last_opt_step": 5, "best_epoch": 1}},
        "rng_state": rng_state(),
    }  # fmt: skip
    merged = {k: v for k, v in {**good, **state}.items() if v is not ...}
    return Checkpoint(tmp_path / "last.pt", model={}, ema=None, model_yaml={}, names=[], state=merged)


def test_a_good_resume_state_is_restored(tmp_path):
    progress = restore_training(_checkpoint(tmp_path), _optimization(), epochs=5, restore_rng=True)
    assert (progress.start_epoch, progress.best_fitness, progress.best_epoch) == (3, 0.4, 1)
    assert (progress.steps.step, progress.steps.last_opt_step) == (6, 5)


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"optimizer": ...}, "no 'optimizer' state"),
        ({"epoch": ...}, "no 'epoch'"),
        ({"epoch": -5}, r"'epoch' must be an integer >= 0, got -5"),
        ({"epoch": "3"}, r"'epoch' must be an integer >= 0, got '3'"),
        ({"optimizer": {"state": 1}}, "'optimizer' does not fit this run"),
        ({"scheduler": {"x": 1}}, "'scheduler'"),
        ({"train_args": {"_progress": {"step": "many"}}}, "_progress.step"),
    ],
)
def test_a_malformed_resume_state_names_the_file_and_the_entry(tmp_path, state, message):
    ckpt = _checkpoint(tmp_path, **state)
    with pytest.raises(CheckpointError, match=message) as error:
        restore_training(ckpt, _optimization(), epochs=5, restore_rng=True)
    assert str(error.value).startswith(str(ckpt.path)) and "\n" not in str(error.value)


STRIPPED = dict.fromkeys(("optimizer", "scheduler", "scaler", "rng_state"), ...)  # a finished run's last.pt


def test_a_run_that_finished_is_not_resumed(tmp_path):
    with pytest.raises(ValueError, match=r"last.pt: the run already finished its 3 epochs; nothing to resume$"):
        restore_training(_checkpoint(tmp_path, **STRIPPED), _optimization(), epochs=3, restore_rng=True)


def test_a_run_whose_epochs_are_trained_but_not_its_end_is_restored(tmp_path):
    """Before: "nothing to resume", so that best.pt, the final validation and the strip never came."""
    progress = restore_training(_checkpoint(tmp_path), _optimization(), epochs=3, restore_rng=True)
    assert progress.start_epoch == 3 and progress.trained_out(epochs=3, patience=0)


def test_early_stopping_counts_on_from_the_checkpoint(tmp_path):
    """Epoch 2 is the second without gain since epoch 0: a resume with patience 3 trains on and stops after the
    next epoch without gain (before: the count started again at 0); with patience 2 the run had stopped early,
    and once its last.pt is stripped it is finished (before: "no 'optimizer' state")."""
    ckpt = _checkpoint(tmp_path, train_args={**TrainConfig().to_dict(), "_progress": {"best_epoch": 0}})
    progress = restore_training(ckpt, _optimization(), epochs=10, restore_rng=True, patience=3)
    assert progress.epochs_without_gain == 2 and not progress.trained_out(epochs=10, patience=3)
    assert progress.trained_out(epochs=10, patience=2) and not progress.trained_out(epochs=10, patience=0)
    stripped = _checkpoint(tmp_path, **STRIPPED, train_args=ckpt.state["train_args"])
    with pytest.raises(ValueError, match=r"finished after 3 of its 10 epochs \(stopped early\); nothing to resume$"):
        restore_training(stripped, _optimization(), epochs=10, restore_rng=True, patience=2)
    with pytest.raises(CheckpointError, match="no 'optimizer' state"):  # epochs left: not a finished run's
        restore_training(stripped, _optimization(), epochs=10, restore_rng=True, patience=3)


def test_a_best_pt_lost_with_its_epoch_is_written_from_last_pt(tmp_path, caplog):
    """--nosave holds the best epoch's weights in memory: a run stopped as it writes best.pt at its end loses them.
    Before: the resume left best.pt missing, and the run's end failed on it."""
    ckpt = _checkpoint(tmp_path)  # epoch 2, best epoch 1
    save_checkpoint(ckpt.path, ckpt.payload())
    reconcile_weights(tmp_path, ckpt, read_progress(ckpt), save_period=0)
    assert load_checkpoint(tmp_path / "best.pt").state["epoch"] == 2
    assert "best.pt is missing and the weights of the best epoch (1) with it" in caplog.text


@pytest.mark.parametrize("best", [math.nan, math.inf, "0.9"])
def test_a_non_finite_best_fitness_restarts_from_zero_with_a_warning(tmp_path, caplog, best):
    progress = restore_training(_checkpoint(tmp_path, best_fitness=best), _optimization(), epochs=5, restore_rng=True)
    assert progress.best_fitness == 0.0  # so that the next epoch with any fitness writes best.pt
    assert "best_fitness" in caplog.text


@pytest.mark.parametrize("garbage", [{"python": 3}, "noise", {"torch": torch.zeros(3)}])
def test_an_unreadable_rng_state_is_skipped_with_a_warning(tmp_path, caplog, garbage):
    before = torch.get_rng_state()
    progress = restore_training(_checkpoint(tmp_path, rng_state=garbage), _optimization(), epochs=5, restore_rng=True)
    assert progress.start_epoch == 3
    assert "rng_state unreadable" in caplog.text
    torch.set_rng_state(before)


def test_pending_gradients_go_back_on_the_parameters_they_came_from(tmp_path):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 2, 1))
    assert pending_gradients(model) == {}  # no batch since the last step
    model(torch.rand(1, 3, 8, 8)).sum().backward()
    saved = pending_gradients(model)
    assert set(saved) == {"0.weight", "0.bias", "1.weight", "1.bias"}
    fresh = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 2, 1))
    restore_gradients(_checkpoint(tmp_path, pending_gradients=saved), fresh)
    assert all(torch.equal(p.grad, saved[name]) for name, p in fresh.named_parameters())
    assert "pending_gradients" not in release_payload({"model": {}, "pending_gradients": saved})
    wrong = _checkpoint(tmp_path, pending_gradients={"0.weight": torch.zeros(1)})
    with pytest.raises(CheckpointError, match=r"last.pt: .*'pending_gradients' entry '0.weight' does not fit"):
        restore_gradients(wrong, fresh)


@pytest.mark.parametrize(
    ("args", "flag"), [({"epochs": "10"}, "--epochs"), ({"imgsz": "640"}, "--img"), ({"batch": 2.5}, "--batch")]
)
def test_saved_settings_of_the_wrong_type_name_the_checkpoint_and_the_flag(tmp_path, args, flag):
    ckpt = _checkpoint(tmp_path, train_args={**TrainConfig().to_dict(), **args})
    with pytest.raises(CheckpointError, match=f"{ckpt.path}: invalid saved training settings.*{flag} must be int"):
        resume_config(ckpt.path, ckpt)


def test_resume_finds_relative_paths_from_another_working_folder(tmp_path, monkeypatch):
    origin = tmp_path / "work"
    (origin / "runs" / "train" / "exp3" / "weights").mkdir(parents=True)
    (origin / "data").mkdir()
    (origin / "data" / "my.yaml").write_text("train: images\n")
    args = {**TrainConfig(data="data/my.yaml", hyp="synthetic", project="runs/train", name="exp").to_dict()}
    ckpt = _checkpoint(tmp_path, train_args=args)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = resume_config(Path("../work/runs/train/exp3/weights/last.pt"), ckpt)
    assert cfg.data == str(origin / "data" / "my.yaml")
    assert (Path(cfg.project), cfg.name) == (origin / "runs" / "train", "exp3")
    assert cfg.model == "tph-yolov5n" and cfg.hyp == "synthetic"  # built-in names stay names


def test_a_new_run_stores_its_paths_resolved(tmp_path):
    (tmp_path / "my.yaml").write_text("train: images\n")
    cfg = with_resolved_paths(TrainConfig(data="my.yaml", weights=None), tmp_path)
    assert cfg.data == str(tmp_path / "my.yaml") and cfg.model == "tph-yolov5n" and cfg.weights is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"label_smoothing": 2.0}, r"--label-smoothing must be in \[0, 1\], got 2.0"),
        ({"grad_clip": -1.0}, r"--grad-clip must be >= 0, got -1.0"),
        ({"grad_clip": math.nan}, r"--grad-clip must be >= 0, got nan"),
        ({"imgsz": 0}, r"--img must be in \[1, 11584\], got 0"),
        ({"batch": -1}, "--batch must be >= 1, got -1"),
        ({"freeze": -1}, "--freeze must be >= 0"),
        ({"max_det": 0}, "max_det must be >= 1, got 0"),
        ({"epochs": True}, "--epochs must be int, got True"),
    ],
)
def test_settings_out_of_range_are_refused_by_their_flag(values, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**values)


def test_freezing_every_layer_is_refused_before_the_data_is_read(tmp_path):
    model = torch.nn.Module()
    model.model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1))
    check_freeze(model, 2)
    with pytest.raises(ValueError, match="--freeze 3: the model has 3 layers; freeze at most 2"):
        check_freeze(model, 3)
    with pytest.raises(ValueError, match="--freeze 999: the model has 3 layers"):
        check_freeze(model, 999)


def test_a_run_that_fails_to_start_leaves_no_empty_folder(tmp_path):
    cfg = replace(TrainConfig(project=str(tmp_path / "runs"), name="exp"), data=str(tmp_path / "missing.yaml"))
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        Trainer(cfg, CPU)
    assert not (tmp_path / "runs" / "exp").exists()


def test_a_resumed_run_keeps_the_layout_and_autocast_its_checkpoint_ran_with():
    from tphyolo.runtime.config import RuntimeConfig
    from tphyolo.training.state import RUNTIME_KEY, ran_with, training_runtime

    cpu = torch.device("cpu")
    ran = {RUNTIME_KEY: ran_with(RuntimeConfig(channels_last=True, amp="bf16"))}
    kept, why = training_runtime(RuntimeConfig(), cpu, architecture="m", resumed=ran, source="last.pt")
    assert (kept.channels_last, kept.amp) == (True, "bf16")  # whatever the rule says on this machine
    assert why["layout"].describe() == "NHWC (resumed: as last.pt ran)" and why["precision"].source == "resumed"
    given, why = training_runtime(RuntimeConfig(amp="off"), cpu, architecture="m", resumed=ran, source="last.pt")
    assert (given.channels_last, given.amp) == (True, "off") and why["precision"].source == "flag"
    exact, why = training_runtime(RuntimeConfig(deterministic=True), cpu, architecture="m", resumed=ran, source="x")
    assert (exact.channels_last, exact.amp) == (False, "off") and why["layout"].source == "deterministic"
    for broken in ({RUNTIME_KEY: {"channels_last": "yes", "amp": "bf16"}}, {RUNTIME_KEY: []}, {}):
        _, why = training_runtime(RuntimeConfig(), cpu, architecture="m", resumed=broken, source="x")
        assert why["layout"].source == "rule"

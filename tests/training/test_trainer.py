"""The training engine: a run end to end, resume after SIGKILL, corrupt checkpoints, DDP, learning."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from tests.helpers import save_model_checkpoint
from tests.torchrun import torchrun

from tphyolo.checkpoint.format import CheckpointError, load_checkpoint
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.hyp import load_hyp
from tphyolo.training.log import read_results
from tphyolo.training.model.setup import wrap_ddp
from tphyolo.training.trainer import Trainer, train

CPU = RuntimeConfig(device="cpu")


def tiny_config(data: Path, project: Path, **overrides) -> TrainConfig:
    values = dict(
        data=str(data), model="tph-yolov5n", imgsz=128, batch=4, epochs=2, workers=0, project=str(project),
        name="run", plots=False, warmup_min_steps=2,
    )  # fmt: skip
    values.update(overrides)
    return TrainConfig(**values)


@pytest.mark.slow
def test_train_writes_run_outputs(tiny_synthetic, tmp_path):
    result = train(tiny_config(tiny_synthetic, tmp_path, plots=True, save_period=1), CPU)
    run = result.run_dir
    for name in ("args.yaml", "hyp.yaml", "results.csv", "results.png", "labels.jpg", "train_batch0.jpg"):
        assert (run / name).is_file(), name
    assert list(run.glob("events.out.tfevents.*")), "no TensorBoard events"
    assert (run / "weights" / "last.pt").is_file() and (run / "weights" / "epoch2.pt").is_file()
    columns = read_results(run / "results.csv")
    assert columns["epoch"] == [0.0, 1.0]
    assert {"train/box_loss", "metrics/mAP50", "metrics/mAP50-95", "lr/pg0"} <= set(columns)
    ckpt = load_checkpoint(result.last)
    resumable = load_checkpoint(run / "weights" / "epoch2.pt")  # as written during the run
    assert resumable.state["epoch"] == 1 and resumable.ema is not None and "optimizer" in resumable.state
    assert ckpt.state["epoch"] == 1 and ckpt.ema is None and "optimizer" not in ckpt.state  # stripped at the end
    assert all(torch.equal(v, resumable.ema[k]) for k, v in ckpt.model.items())
    assert ckpt.names == ["car", "bus", "pedestrian", "truck", "motor", "van"]
    model = ckpt.build_model()
    assert model(torch.rand(1, 3, 128, 128)).shape[-1] == 5 + 6


class ScriptedTrainer(Trainer):
    """A Trainer whose validation returns scripted metrics, so that the fitness of each epoch is known."""

    SCRIPT = ({"metrics/mAP50": 0.5, "metrics/mAP50-95": 0.3}, {"metrics/mAP50": 0.4, "metrics/mAP50-95": 0.2})

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.validations = 0

    def validate(self):
        self.validations += 1
        return dict(self.SCRIPT[self.validations - 1])


@pytest.mark.slow
def test_built_trainer_honours_its_settings_and_keeps_the_best_epoch(tiny_synthetic, tmp_path):
    hyp_file = tmp_path / "hyp.yaml"
    hyp_file.write_text(yaml.safe_dump({**load_hyp("synthetic"), "label_smoothing": 0.1}))
    cfg = tiny_config(
        tiny_synthetic, tmp_path, imgsz=100, hyp=str(hyp_file), label_smoothing=0.0, freeze=2, autoanchor=False
    )
    trainer = ScriptedTrainer(cfg, CPU)
    assert trainer.data.imgsz == 128  # rounded up to the stride grid
    assert trainer.loss_fn.cls_negative == 0.0  # --label-smoothing 0 wins over the file's 0.1
    assert yaml.safe_load((trainer.run_dir / "hyp.yaml").read_text())["label_smoothing"] == 0.0
    frozen = {n for n, p in trainer.model.named_parameters() if not p.requires_grad}
    assert frozen and {int(n.split(".")[1]) for n in frozen} == {0, 1}
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}

    result = trainer.fit()
    assert result.epochs_run == 2 and result.best_fitness == pytest.approx(0.1 * 0.5 + 0.9 * 0.3)
    best, last = load_checkpoint(result.best), load_checkpoint(result.last)
    assert (best.state["epoch"], last.state["epoch"]) == (0, 1)
    assert best.state["best_fitness"] == last.state["best_fitness"] == pytest.approx(0.32)
    after = dict(trainer.model.named_parameters())
    assert all(torch.equal(before[n], after[n]) for n in frozen)
    assert any(not torch.equal(before[n], after[n]) for n in before if n not in frozen)


def test_half_weights_are_refused_for_training(tmp_path):
    with pytest.raises(ValueError, match="inference only"):
        Trainer(TrainConfig(project=str(tmp_path)), RuntimeConfig(device="cpu", half=True))
    assert not list(tmp_path.iterdir()), "nothing may be created before the refusal"


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(optimizer="LBFGS")
    with pytest.raises(ValueError, match="epochs"):
        TrainConfig(epochs=0)


@pytest.mark.slow
def test_sigkill_then_resume_continues_the_same_run(tiny_synthetic, tmp_path):
    cmd = [
        sys.executable, "-m", "tphyolo", "train", "--data", str(tiny_synthetic), "--model", "tph-yolov5n",
        "--img", "128", "--batch", "4", "--epochs", "4", "--workers", "0", "--project", str(tmp_path),
        "--name", "run", "--no-plots", "--device", "cpu",
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1")
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    last = tmp_path / "run" / "weights" / "last.pt"
    deadline = time.monotonic() + 300
    while not last.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert last.exists(), "no checkpoint was written before the kill"
    saved = load_checkpoint(last)
    epoch = saved.state["epoch"]
    assert epoch < 3, "the run finished before it could be killed"

    trainer = Trainer.resume(last, CPU)
    assert trainer.progress.start_epoch == epoch + 1
    assert trainer.progress.steps.step == saved.state["train_args"]["_progress"]["step"]
    restored = trainer.optim.optimizer.state_dict()
    assert saved.state["optimizer"]["state"], "the checkpoint holds no optimiser state"
    for key, value in saved.state["optimizer"]["state"].items():
        for name, tensor in value.items():  # AdamW: step, exp_avg, exp_avg_sq
            assert torch.equal(torch.as_tensor(restored["state"][key][name]), torch.as_tensor(tensor)), name
    assert trainer.optim.ema.updates == saved.state["ema_updates"]

    result = Trainer.resume(last, CPU).fit()
    assert result.run_dir == tmp_path / "run"
    epochs = read_results(result.run_dir / "results.csv")["epoch"]
    assert epochs == [float(e) for e in range(4)], epochs
    assert load_checkpoint(result.last).state["epoch"] == 3


def test_truncated_or_corrupt_last_checkpoint_is_refused(tmp_path):
    from tphyolo.models import build_model

    model = build_model("yolov5n", num_classes=2)
    path = tmp_path / "last.pt"
    save_model_checkpoint(path, model, ["a", "b"])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=str(path)):
        Trainer.resume(path, CPU)
    path.write_bytes(b"\x00" * 1000)
    with pytest.raises(CheckpointError, match=str(path)):
        Trainer.resume(path, CPU)
    save_model_checkpoint(path, model, ["a", "b"])
    with pytest.raises(ValueError, match="not a resumable training checkpoint"):
        Trainer.resume(path, CPU)


def test_sync_bn_is_refused_on_cpu_with_a_warning(caplog):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    converted = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(converted[1], torch.nn.SyncBatchNorm)
    assert converted[1].weight is model[1].weight  # the converted model trains the same parameters
    # Without a process group DDP cannot be built; the CPU refusal happens before it.
    with pytest.raises((RuntimeError, ValueError)):
        wrap_ddp(model, device=torch.device("cpu"), sync_bn=True)
    assert "SyncBatchNorm is GPU-only" in caplog.text


@pytest.mark.slow
def test_two_process_ddp_on_cpu_keeps_ranks_identical(tiny_synthetic, tmp_path):
    worker = Path(__file__).with_name("ddp_worker.py")
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(worker),
        str(tiny_synthetic), str(tmp_path),
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    infos = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert all(i["world_size"] == 2 and i["ddp"] == "DistributedDataParallel" for i in infos)
    assert infos[0]["samples"] == infos[1]["samples"] == 4  # 8 images sharded over 2 ranks
    assert infos[0]["steps"] == 2
    w0, w1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2))
    initial = torch.load(tmp_path / "initial.pt", weights_only=True)
    parameters = [k for k in w0 if w0[k].is_floating_point() and "running_" not in k and "anchors" not in k]
    for key in parameters:
        assert torch.equal(w0[key], w1[key]), key  # gradients were averaged: the ranks agree exactly
    # ...after a real optimiser step (the first warm-up step moves the biases, whose lr starts high).
    changed = [k for k in parameters if not torch.equal(w0[k], initial[k])]
    assert any(k.endswith(".bias") for k in changed), "no parameter changed"


@pytest.mark.slow
def test_validation_during_ddp_runs_on_every_rank_with_the_numbers_of_one(tiny_synthetic, tmp_path):
    """2 ranks validate 2 batches of 2 (one each) with rank 0's EMA: the metrics and validation losses rank 0
    gathers are those of one process validating the whole split."""
    torchrun(str(Path(__file__).with_name("ddp_validation_worker.py")), str(tiny_synthetic), str(tmp_path))
    info = json.loads((tmp_path / "validation.json").read_text())
    assert info["world_size"] == 2 and info["val_images"] == 4 and info["shard"] == 2
    assert info["shared"] == info["alone"] and info["shared_oracle"] == info["alone_oracle"]
    assert all(info["alone"][f"val/{name}_loss"] > 0 for name in ("box", "obj", "cls"))
    assert 0.1 < info["alone_oracle"]["metrics/mAP50"] < 0.95

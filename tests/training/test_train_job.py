"""`run_train` from Python, without argparse: a job trains, a resume that is given settings or finds no run is
refused before any run folder is made, and a job over several GPUs relaunches only with a command line."""

import pytest
import torch

from tphyolo.errors import UsageError
from tphyolo.runtime import distributed
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.job import TrainJob, run_train, settings_given

CPU = RuntimeConfig(device="cpu")


@pytest.mark.slow
def test_a_job_trains_one_epoch_and_says_where_the_weights_are(tiny_synthetic, tmp_path):
    config = TrainConfig(data=str(tiny_synthetic), imgsz=64, batch=4, epochs=1, workers=0, plots=False,
                         warmup_min_steps=1, project=str(tmp_path), name="job")  # fmt: skip
    run = run_train(TrainJob(config), runtime=CPU)
    assert run.is_main and run.exit_code == 0
    assert run.result.run_dir == tmp_path / "job" and run.result.epochs_run == 1
    assert run.result.last.is_file() and run.result.best.is_file()


def test_settings_given_with_resume_are_refused_by_name(tmp_path):
    job = TrainJob(TrainConfig(project=str(tmp_path), epochs=50, batch=2), resume="x/last.pt")
    assert settings_given(job.config, keep=("project",)) == ["--batch", "--epochs"]
    with pytest.raises(UsageError, match="--batch, --epochs would be ignored"):
        run_train(job, runtime=CPU)
    assert not any(tmp_path.iterdir())


def test_resume_without_a_run_names_the_project(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"no \\*/weights/last.pt under {tmp_path}"):
        run_train(TrainJob(TrainConfig(project=str(tmp_path)), resume=""), runtime=CPU)


def test_several_gpus_relaunch_with_the_given_argv_or_are_refused_without_one(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    launched = []
    monkeypatch.setattr(distributed, "launch_torchrun", lambda argv, *, nproc: launched.append((argv, nproc)) or 3)
    runtime = RuntimeConfig(device="0,1")
    run = run_train(TrainJob(), runtime=runtime, argv=["train", "--epochs=3"])
    assert (run.result, run.exit_code, launched) == (None, 3, [(["train", "--epochs=3"], 2)])
    with pytest.raises(UsageError, match="device 0,1: several GPUs train under torchrun"):
        run_train(TrainJob(), runtime=runtime)
    assert len(launched) == 1

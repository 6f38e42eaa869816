"""A training run in a process of its own ends with exit 0: its loader workers, forked before the final validation
loads the compiled runtime, are ended first (`tphyolo.data.loader.stop_workers`). Left to the interpreter's exit
they crashed it (exit 139) after every table and file was written: on an AMX Xeon, OpenVINO in bf16 on two
threads, as a user runs it (the suite's cap on the CPU's instruction set and its one thread hid it)."""

import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_train_with_loader_workers_exits_0_after_the_compiled_final_validation(tiny_synthetic, tmp_path):
    argv = [sys.executable, "-m", "tphyolo", "train", "--data", str(tiny_synthetic), "--epochs", "1", "--img", "64",
            "--batch", "4", "--workers", "2", "--project", str(tmp_path), "--name", "run"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS")}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)  # the machine as a user has it
    assert done.returncode == 0, done.stderr[-2000:]
    assert "on OpenVINO (" in done.stdout + done.stderr  # the final validation ran on the compiled runtime
    assert (tmp_path / "run" / "weights" / "best.pt").is_file()

"""torch.compile's caches live in tphyolo's cache folder, and a second process compiling the same model finds
them there (a cache hit instead of compiling again)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tphyolo.runtime.compile_cache import CACHE_ENV, INDUCTOR_ENV, compile_cache_dir, describe_cache
from tphyolo.runtime.config import RuntimeConfig, configure_process

COMPILE_AND_STEP = """
import json, torch
from tphyolo.runtime.compile_cache import cache_counters
from tphyolo.runtime.config import RuntimeConfig, configure_process

runtime = RuntimeConfig(device="cpu", compile="default")
report = configure_process(runtime)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.SiLU())
step = runtime.compile_model(model)
step(torch.rand(2, 3, 16, 16)).sum().backward()  # forward and backward graphs
print(json.dumps({"report": report, "counters": cache_counters()}))
"""


def test_cache_folder_choice(tmp_path, monkeypatch):
    monkeypatch.delenv(INDUCTOR_ENV, raising=False)
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache_dir() == (tmp_path / "xdg" / "tphyolo" / "compile", "default")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert compile_cache_dir() == (tmp_path / "mine", "tphyolo")
    monkeypatch.setenv(INDUCTOR_ENV, str(tmp_path / "theirs"))  # the user's PyTorch setting wins
    assert compile_cache_dir() == (tmp_path / "theirs", "user")


def test_configure_process_points_the_compile_caches_at_ours_only_when_compiling(tmp_path, monkeypatch):
    monkeypatch.delenv(INDUCTOR_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "compile"))
    report = configure_process(RuntimeConfig(device="cpu"))
    assert "compile_cache" not in report and INDUCTOR_ENV not in os.environ
    report = configure_process(RuntimeConfig(device="cpu", compile="default"))
    assert report["compile_cache"] == str(tmp_path / "compile") and report["compile_cache_source"] == "tphyolo"
    assert os.environ[INDUCTOR_ENV] == str(tmp_path / "compile")


def test_describe_cache_counts_what_is_there(tmp_path):
    assert describe_cache(tmp_path / "none") == {"dir": str(tmp_path / "none"), "exists": False, "files": 0, "mb": 0}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "graph").write_bytes(b"x" * 2**20)
    assert describe_cache(tmp_path) == {"dir": str(tmp_path), "exists": True, "files": 1, "mb": 1.0}


@pytest.mark.slow
def test_a_second_process_hits_the_compile_cache(tmp_path):
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        pytest.skip("no C++ compiler: inductor cannot compile on this CPU")
    env = {k: v for k, v in os.environ.items() if k != INDUCTOR_ENV} | {CACHE_ENV: str(tmp_path / "cache")}

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", COMPILE_AND_STEP], capture_output=True, text=True, env=env,
                              timeout=600, check=True)  # fmt: skip
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold = run()
    assert cold["report"]["compile_cache"] == str(tmp_path / "cache")
    assert cold["counters"]["fx_graph_misses"] > 0 and cold["counters"]["fx_graph_hits"] == 0
    assert describe_cache(Path(tmp_path / "cache"))["files"] > 0
    warm = run()
    assert warm["counters"]["fx_graph_hits"] > 0 and warm["counters"]["fx_graph_misses"] == 0
    assert warm["counters"]["autograd_hits"] > 0

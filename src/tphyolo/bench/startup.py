"""Start-up benchmark: time to the first training step of a cold start against a warm one, each in a fresh
process.

Each start is `python -m tphyolo train` for one epoch (by default on the built-in synthetic set; the data is
generated and scanned by an untimed start first, so both timed starts read the same files), stopped as soon as
its run folder holds `startup.json` (the record `tphyolo.training.startup.StartupClock` writes after the first
step). The cold start uses an empty compile cache; the warm start reuses the cache the cold one filled. The
baseline is the cold start: `speedup` is how much sooner the warm start reached its first step. Without
--compile the two differ only by what the operating system kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tphyolo.bench.report import Row
from tphyolo.data.builtin.synthetic import ensure_synthetic
from tphyolo.runtime.compile_cache import CACHE_ENV, INDUCTOR_ENV

POLL_S = 0.2


@dataclass(frozen=True)
class StartupSettings:
    """What the timed starts train: `model` at `image_size` px on `data`, `batch` images per step, on `device`,
    with torch.compile mode `compile` ("off" for none)."""

    data: str = "synthetic"
    model: str = "tph-yolov5n"
    image_size: int = 320
    batch: int = 8
    device: str = "cpu"
    compile: str = "off"
    timeout_s: float = 1800.0


def _train_command(settings: StartupSettings, project: Path, name: str) -> list[str]:
    command = [sys.executable, "-m", "tphyolo", "train", "--data", settings.data, "--model", settings.model,
               "--img", str(settings.image_size), "--batch", str(settings.batch), "--epochs", "1", "--workers", "0",
               "--project", str(project), "--name", name, "--no-plots", "--device", settings.device]  # fmt: skip
    if settings.compile != "off":
        command += ["--compile", settings.compile]
    return command


def time_to_first_step(command: list[str], record: Path, env: dict[str, str], timeout_s: float) -> dict:
    """Runs `command` until `record` (a startup.json) appears, stops it, and returns the record."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout_s
    try:
        while not record.is_file():
            if process.poll() is not None:
                tail = (process.stderr.read() or "").strip().splitlines()[-5:]
                raise RuntimeError(f"the timed start exited with {process.returncode} before its first step: {tail}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no first step within {timeout_s:.0f} s")
            time.sleep(POLL_S)
        time.sleep(POLL_S)  # the record is written whole by one call; let it land
        return json.loads(record.read_text())
    finally:
        process.kill()
        process.wait()


def bench_startup(settings: StartupSettings, *, log: Callable[[str], None] = print) -> list[Row]:
    """One row: cold (baseline) and warm time to first step in milliseconds, with both phase breakdowns."""

    if settings.data == "synthetic":
        ensure_synthetic()  # generated once, outside the timed starts
    with tempfile.TemporaryDirectory(prefix="tphyolo-startup-") as tmp:
        project = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != INDUCTOR_ENV} | {CACHE_ENV: str(project / "compile")}
        # a first untimed start scans the dataset (its cache then serves both timed starts) and warms the disk
        prime = replace(settings, compile="off")
        time_to_first_step(_train_command(prime, project, "prime"), project / "prime" / "startup.json", env,
                           settings.timeout_s)  # fmt: skip
        records = {}
        for name in ("cold", "warm"):
            log(f"startup: {name} start of {settings.model} at {settings.image_size} px, compile={settings.compile}")
            records[name] = time_to_first_step(
                _train_command(settings, project, name), project / name / "startup.json", env, settings.timeout_s
            )
            log(f"  {records[name]['total_s']:.2f} s: {records[name]['phases_s']}")
    cold, warm = records["cold"], records["warm"]
    extra = {"cold_phases_s": cold["phases_s"], "warm_phases_s": warm["phases_s"]}
    if "compile_cache" in warm:
        extra["warm_compile_cache"] = warm["compile_cache"]
    return [
        Row(
            name="startup",
            config=f"{settings.model} img{settings.image_size} b{settings.batch} compile={settings.compile} "
            f"(baseline: cold start)",
            baseline_ms=cold["total_s"] * 1000,
            ours_ms=warm["total_s"] * 1000,
            extra=extra,
        )
    ]

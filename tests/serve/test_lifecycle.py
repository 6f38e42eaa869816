"""The service's life: SIGTERM finishes the requests in flight; a killed worker is detected, its requests are
answered 503 and a new worker (loading the weights file again) answers the rest; a missing extra is refused."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import torch
from tests.helpers import save_model_checkpoint
from tests.serve.conftest import NAMES, SETTINGS, serving, wait_ready

from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor
from tphyolo.serve import ServeConfig

SRC = Path(__file__).resolve().parents[2] / "src"


def _wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def _post(url: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{url}/v1/detect", content=body, headers={"Content-Type": "image/png"}, timeout=120)


def _gauge(url: str, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", httpx.get(f"{url}/metrics").text, re.MULTILINE)
    assert match, name
    return float(match.group(1))


@pytest.mark.slow
def test_sigterm_finishes_the_requests_in_flight(tiny_weights, image_files, tmp_path):
    """`tphyolo serve` with its worker stopped (SIGSTOP) and three requests accepted (one in the worker, two
    queued) gets SIGTERM: the three are answered 200 with their detections, then the process exits 0."""
    command = [sys.executable, "-m", "tphyolo", "serve", "--weights", str(tiny_weights), "--port", "0",
               "--img", str(SETTINGS["imgsz"]), "--conf", str(SETTINGS["conf"]), "--max-batch", "1", "--device", "cpu",
               "--grace", "60"]  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(SRC)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)
        wait_ready(url)
        worker = httpx.get(f"{url}/healthz").json()["worker"]["pid"]
        body = image_files[1].read_bytes()
        os.kill(worker, signal.SIGSTOP)
        with ThreadPoolExecutor(3) as pool:
            answers = [pool.submit(_post, url, body) for _ in range(3)]
            _wait_for(lambda: _gauge(url, "tphyolo_queue_depth") == 2)
            process.send_signal(signal.SIGTERM)
            time.sleep(0.5)  # the signal handled first: the worker then finishes what was accepted
            assert not any(a.done() for a in answers)
            os.kill(worker, signal.SIGCONT)
            responses = [a.result() for a in answers]
        assert [r.status_code for r in responses] == [200, 200, 200]
        counts = {len(r.json()["images"][0]["boxes"]) for r in responses}
        assert len(counts) == 1 and counts.pop() > 0
        assert process.wait(timeout=60) == 0
        out, err = process.communicate()
        assert "stopped" in out and "Traceback" not in err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_a_killed_worker_is_restarted_and_loads_the_replaced_file(tiny_weights, image_files, tmp_path):
    """SIGKILL of the worker during a batch: that request gets 503 with Retry-After, the service restarts
    the worker and answers again. The weights file replaced while serving changes nothing until then; the new
    worker loads the new file, and says so by its hash."""
    weights = shutil.copy(tiny_weights, tmp_path / "model.pt")
    body = image_files[0].read_bytes()
    with serving(weights, serve=ServeConfig(port=0, max_batch=1)) as (url, app):
        service = app.state.service
        first = _post(url, body).json()
        torch.manual_seed(1)
        save_model_checkpoint(tmp_path / "other.pt", build_model("yolov5n", names=NAMES), NAMES)
        os.replace(tmp_path / "other.pt", weights)
        still = _post(url, body).json()
        assert still["model"] == first["model"] and still["images"] == first["images"]

        old_pid = service.worker.pid
        os.kill(old_pid, signal.SIGSTOP)
        with ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(_post, url, body)
            _wait_for(lambda: service.batcher.in_flight == 1)
            os.kill(old_pid, signal.SIGKILL)
            crashed = in_flight.result()
        assert crashed.status_code == 503 and crashed.headers["Retry-After"] == "1"
        assert "inference worker" in crashed.json()["error"]
        wait_ready(url)
        again = _post(url, body).json()
        health = httpx.get(f"{url}/healthz").json()["worker"]
        assert health["restarts"] == 1 and health["pid"] not in (None, old_pid)
        assert again["model"]["hash"] != first["model"]["hash"]
        expected = Predictor(str(weights), device="cpu", **SETTINGS)([image_files[0]])[0]
        assert again["images"][0]["boxes"] == expected.boxes.tolist()


def test_without_the_serve_extra_the_app_is_refused_naming_it(tiny_weights, monkeypatch):
    from tphyolo.imports import MissingExtraError
    from tphyolo.serve import create_app

    monkeypatch.setitem(sys.modules, "fastapi", None)  # `import fastapi` raises ImportError
    with pytest.raises(MissingExtraError, match=r"tphyolo serve needs the fastapi package.*tphyolo\[serve\]"):
        create_app(str(tiny_weights))

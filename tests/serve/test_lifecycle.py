"""The service's life: SIGTERM finishes the requests in flight; a killed worker is detected, its requests are
answered 503 and a new worker (loading the weights file again) answers the rest; a missing extra is refused."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import httpx
import numpy as np
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
    """`tphyolo serve` with its worker stopped (SIGSTOP) and three requests accepted (one in the worker per
    inference stream, the others queued) gets SIGTERM: the three are answered 200 with their detections, then
    the process exits 0."""
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
        streams = httpx.get(f"{url}/v1/models").json()["models"][0]["streams"]
        body = image_files[1].read_bytes()
        os.kill(worker, signal.SIGSTOP)
        with ThreadPoolExecutor(3) as pool:
            answers = [pool.submit(_post, url, body) for _ in range(3)]
            _wait_for(lambda: _gauge(url, "tphyolo_queue_depth") == max(3 - streams, 0))
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


@pytest.mark.slow
def test_a_stuck_worker_is_ended_at_the_deadline_and_restarted(tiny_weights, image_files):
    """A worker that stops answering (SIGSTOP) holds its batch past the 3 s deadline: the request gets 504,
    the worker is ended and a new one started; /readyz says 503 meanwhile, then 200, and requests are answered
    again, the restart counted."""
    body = image_files[0].read_bytes()
    with serving(tiny_weights, serve=ServeConfig(port=0, max_batch=1, timeout=3)) as (url, app):
        old_pid = app.state.service.worker.pid
        os.kill(old_pid, signal.SIGSTOP)
        stuck = _post(url, body)
        assert stuck.status_code == 504 and "deadline" in stuck.json()["error"]
        readiness = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            response = httpx.get(f"{url}/readyz", timeout=10)
            readiness.append((response.status_code, response.json().get("error")))
            if response.status_code == 200:
                break
            time.sleep(0.05)
        assert (503, "the inference worker restarts") in readiness and readiness[-1][0] == 200
        health = httpx.get(f"{url}/healthz").json()["worker"]
        assert health["restarts"] == 1 and health["pid"] not in (None, old_pid)
        assert _gauge(url, "tphyolo_worker_restarts_total") == 1.0
        assert _post(url, body).status_code == 200


@pytest.mark.slow
def test_a_stopped_worker_with_a_full_pipe_is_killed_at_the_deadline_and_restarted(tiny_weights):
    """A worker stopped (SIGSTOP) and sent images larger than its pipe holds: the three requests get an error
    by their deadline (504; a batch whose write the kill of the same worker ends first is answered 503, the
    worker being gone), the worker is killed and a new one started, and the same image is answered 200 again.
    Old behaviour: the batching thread blocked for ever writing to the full pipe, the deadline never acted, and
    every request got 503 until the worker was resumed by hand."""
    noise = np.random.default_rng(0).integers(0, 256, (2000, 2000, 3), dtype=np.uint8)
    body = cv2.imencode(".png", noise)[1].tobytes()  # 12 MB that do not compress: the worker gets the encoded bytes
    with serving(tiny_weights, serve=ServeConfig(port=0, max_batch=1, timeout=3)) as (url, app):
        worker = app.state.service.worker
        old_pid = worker.pid
        os.kill(old_pid, signal.SIGSTOP)
        try:
            with ThreadPoolExecutor(3) as pool:
                statuses = [r.status_code for r in pool.map(lambda _: _post(url, body), range(3))]
            assert 504 in statuses and set(statuses) <= {503, 504}, statuses
            _wait_for(lambda: worker.restarts == 1)
        finally:  # a worker left stopped would hold the server's stop
            with contextlib.suppress(ProcessLookupError):
                os.kill(old_pid, signal.SIGCONT)
        with pytest.raises(ProcessLookupError):
            os.kill(old_pid, 0)  # killed and reaped
        wait_ready(url)
        assert worker.pid not in (None, old_pid)
        again = _post(url, body)
        assert again.status_code == 200 and again.json()["images"][0]["width"] == 2000


@pytest.mark.slow
def test_sigterm_with_a_stuck_worker_ends_within_the_grace_without_a_traceback(tiny_weights, image_files):
    """SIGTERM while the worker is stopped mid-batch: the process ends (exit 0) after the grace by ending the
    worker, long before the batch's deadline (600 s) would have, the request answered, and nothing on stderr is a
    traceback. How long the exit takes past the grace depends on the machine's load, so only the deadline bounds
    it."""
    grace = 3
    command = [sys.executable, "-m", "tphyolo", "serve", "--weights", str(tiny_weights), "--port", "0",
               "--img", str(SETTINGS["imgsz"]), "--device", "cpu", "--max-batch", "1", "--grace", str(grace),
               "--timeout", "600"]  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(SRC)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+", process.stdout.readline()).group(0)
        wait_ready(url)
        worker = httpx.get(f"{url}/healthz").json()["worker"]["pid"]
        os.kill(worker, signal.SIGSTOP)
        with ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(_post, url, image_files[1].read_bytes())
            _wait_for(lambda: _gauge(url, "tphyolo_queue_depth") == 0)
            time.sleep(0.5)  # the batch is in the stopped worker
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=300) == 0  # the stopped worker ended, not waited for until the deadline
            with pytest.raises(httpx.HTTPError):
                in_flight.result(timeout=60).raise_for_status()
        out, err = process.communicate()
        assert "Traceback" not in err and "stopped" in out, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_an_address_not_to_listen_on_and_a_port_in_use_are_one_line_each(tiny_weights):
    env = os.environ | {"PYTHONPATH": str(SRC)}
    base = [sys.executable, "-m", "tphyolo", "serve", "--weights", str(tiny_weights), "--device", "cpu"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        for flags, words in ((["--host", "0.0.0.0.0"], "--host 0.0.0.0.0: not an address to listen on"),
                             (["--port", str(port)], f"--port {port}: cannot listen on 127.0.0.1:{port}")):  # fmt: skip
            done = subprocess.run(base + flags, capture_output=True, text=True, env=env, timeout=120)
            assert done.returncode == 2, done.stderr
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and words in lines[0], done.stderr


def test_without_the_serve_extra_the_app_is_refused_naming_it(tiny_weights, monkeypatch):
    from tphyolo.imports import MissingExtraError
    from tphyolo.serve import create_app

    monkeypatch.setitem(sys.modules, "fastapi", None)  # `import fastapi` raises ImportError
    with pytest.raises(MissingExtraError, match=r"tphyolo serve needs the fastapi package.*tphyolo\[serve\]"):
        create_app(str(tiny_weights))

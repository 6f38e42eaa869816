"""Clients that hold the service without waiting for it: a client that hangs up leaves the queue (its images are
never computed), and a request head or body that trickles in is answered 408 and its connection closed, within
the configured timeouts. A real uvicorn on 127.0.0.1 with a model-less worker; every wait is bounded."""

from __future__ import annotations

import contextlib
import re
import select
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import httpx
import numpy as np
import pytest
from tests.serve.conftest import running

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.serve.app import Service, build_app
from tphyolo.serve.config import ServeConfig
from tphyolo.serve.engine import ModelInfo
from tphyolo.serve.options import Settings

WAIT_S = 30.0  # the bound of every wait: far past the tiny timeouts below, reached only when a test fails
PNG = cv2.imencode(".png", np.full((32, 32, 3), 90, np.uint8))[1].tobytes()


class GatedWorker:
    """InferenceWorker's interface without a model: a batch waits for `gate`, then has no boxes; `images` counts
    the images it was given."""

    def __init__(self) -> None:
        self.gate, self.images, self.info, self.restarts, self.pid = threading.Event(), 0, None, 0, 1

    def start(self) -> ModelInfo:
        self.info = ModelInfo(
            name="gated", hash="0" * 16, names=("car",), stride=32, imgsz=64, backend="none", precision="float32",
            device="cpu", classifier=False, defaults=Settings(InferenceConfig(imgsz=64)),
        )  # fmt: skip
        return self.info

    def detect(self, images, settings, *, timeout=None):
        self.images += len(images)
        self.gate.wait(3 * WAIT_S)  # past any wait of a test: only the test opens it
        return [np.zeros((0, 6), np.float32) for _ in images], 0.0

    def restart(self) -> ModelInfo:
        return self.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.gate.set()


@pytest.fixture
def gated():
    """`gated(serve)` starts a server of a GatedWorker with the settings `serve`: (url, service, worker)."""
    with contextlib.ExitStack() as stack:

        def start(serve: ServeConfig):
            worker = GatedWorker()
            service = Service(DetectorSpec(("gated.pt",), device="cpu"), serve, worker=worker)
            url = stack.enter_context(running(build_app(service), serve))
            stack.callback(worker.gate.set)  # before the server stops (last in, first out): nothing waits
            return url, service, worker

        yield start


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=WAIT_S)


def _wait_for(condition) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def _trickle_until_closed(connection: socket.socket, byte: bytes) -> bytes:
    """Send `byte` every 50 ms, as a slowloris client does, until the server closes the connection; what it
    answered meanwhile. Fails past WAIT_S."""
    answer, deadline = b"", time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            connection.sendall(byte)
            if select.select([connection], [], [], 0.05)[0]:
                chunk = connection.recv(65536)
                if not chunk:
                    return answer
                answer += chunk
        except (BrokenPipeError, ConnectionResetError):
            return answer
    raise AssertionError(f"the connection was still open after {WAIT_S:.0f} s; answered {answer[:60]!r}")


def test_a_client_that_hangs_up_leaves_the_queue_uncomputed(gated):
    """Old behaviour: the request of a client gone stayed queued, holding its image, and was computed."""
    url, service, worker = gated(ServeConfig(port=0, max_batch=1, timeout=3 * WAIT_S))
    post = {"content": PNG, "headers": {"Content-Type": "image/png"}, "timeout": WAIT_S}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(httpx.post, f"{url}/v1/detect", **post)
        _wait_for(lambda: worker.images == 1)  # in the worker, which waits for the gate
        with _connect(url) as leaving:
            leaving.sendall(b"POST /v1/detect HTTP/1.1\r\nHost: t\r\nContent-Type: image/png\r\n"
                            + f"Content-Length: {len(PNG)}\r\n\r\n".encode() + PNG)  # fmt: skip
            _wait_for(lambda: service.batcher.depth == 1)
        _wait_for(lambda: service.batcher.depth == 0)  # gone with its client, before the worker is free
        worker.gate.set()
        assert first.result(WAIT_S).status_code == 200
    assert httpx.post(f"{url}/v1/detect", **post).status_code == 200  # queued after the one gone: FIFO
    assert worker.images == 2
    assert re.search(r'^tphyolo_requests_total\{status="499"\} 1\.0$', httpx.get(f"{url}/metrics").text, re.M)


def _answer(connection: socket.socket) -> bytes:
    """One whole HTTP answer (its head and its Content-Length of body) read from `connection`."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))
    while len(body) < length:
        body += connection.recv(65536)
    return data


@pytest.mark.parametrize("kept_alive", [False, True], ids=["new connection", "after an answer"])
def test_a_trickling_request_head_is_answered_408_and_closed(gated, kept_alive):
    """Old behaviour: uvicorn waits for a request head for ever; a byte now and then kept the connection open."""
    url, _, _ = gated(ServeConfig(port=0, header_timeout=0.3))
    with _connect(url) as slow:
        if kept_alive:  # a request answered on the connection first: the next head is timed from its first byte
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            assert _answer(slow).startswith(b"HTTP/1.1 200 ")
        slow.sendall(b"POST /v1/detect HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        answer = _trickle_until_closed(slow, b"a")
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b'{"error": "request head not received within 0.3 s (--header-timeout)"}' in answer
    assert httpx.get(f"{url}/healthz", timeout=WAIT_S).status_code == 200  # a quick client is still served


def test_a_trickling_body_is_answered_408_and_closed(gated):
    """Old behaviour: the 408 was answered, but the connection was kept open while the body kept trickling."""
    url, _, worker = gated(ServeConfig(port=0, timeout=0.3))
    with _connect(url) as slow:
        slow.sendall(
            b"POST /v1/detect HTTP/1.1\r\nHost: t\r\nContent-Type: image/png\r\nContent-Length: 100000\r\n\r\n"
        )
        answer = _trickle_until_closed(slow, b"\0")
    assert answer.startswith(b"HTTP/1.1 408 ") and b"body not received within 0.3 s (--timeout)" in answer, answer
    assert worker.images == 0

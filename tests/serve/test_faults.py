"""The service under faults, bounded in requests and time: a storm past the queue, clients that leave
mid-upload or mid-answer, slowloris connections and bad requests mixed with good ones. Every good request gets
its own answer (the detections `Predictor` gives its image) or a 503 it may retry; none is lost, and no answer
is a 5xx other than 503."""

from __future__ import annotations

import random
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from tests.serve.conftest import SETTINGS, serving

from tphyolo.predict.predictor import Predictor
from tphyolo.serve import ServeConfig

REQUESTS = 160
CONCURRENCY = 12
TIME_LIMIT_S = 240.0
MEDIA = {".png": "image/png", ".jpg": "image/jpeg"}


def _leave_mid_upload(url: str) -> None:
    """Headers announcing 100 KB, 1 KB of it, then the connection closed."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/detect HTTP/1.1\r\nHost: t\r\nContent-Type: image/png\r\nContent-Length: 100000\r\n\r\n")
        s.sendall(b"\x89PNG" + b"\0" * 1000)


def _leave_before_the_answer(url: str, body: bytes) -> None:
    """A whole request, then the connection closed without reading the answer."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/detect HTTP/1.1\r\nHost: t\r\nContent-Type: image/png\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)  # fmt: skip


@pytest.mark.slow
def test_soak_with_faults_loses_no_answer(tiny_weights, image_files):
    oracle = Predictor(str(tiny_weights), device="cpu", **SETTINGS)(image_files)
    counts = {str(path): len(result) for path, result in zip(image_files, oracle, strict=True)}
    rng = random.Random(5)
    plan = []  # (kind, image index)
    for _ in range(REQUESTS):
        roll = rng.random()
        kind = "bad" if roll < 0.1 else "upload-left" if roll < 0.13 else "answer-left" if roll < 0.16 else "good"
        plan.append((kind, rng.randrange(len(image_files))))
    settings = ServeConfig(port=0, max_queue=16, max_batch=4, timeout=60)
    with serving(tiny_weights, serve=settings) as (url, app):
        slow = [socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) for _ in range(20)]
        for s in slow:  # slowloris: headers begun and never finished
            s.sendall(b"POST /v1/detect HTTP/1.1\r\nHost: t\r\nContent-")
        deadline = time.monotonic() + TIME_LIMIT_S
        outcomes: list[tuple[str, int, object]] = []

        def send(step: tuple[str, int]) -> None:
            kind, index = step
            path = image_files[index]
            if time.monotonic() > deadline:
                return
            if kind == "upload-left":
                _leave_mid_upload(url)
                return
            if kind == "answer-left":
                _leave_before_the_answer(url, path.read_bytes())
                return
            body, media = (b"not an image", "image/png") if kind == "bad" else (path.read_bytes(), MEDIA[path.suffix])
            response = httpx.post(f"{url}/v1/detect", content=body, headers={"Content-Type": media}, timeout=120)
            outcomes.append((kind, response.status_code, (str(path), response.json())))

        with ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(send, plan))
        for s in slow:
            s.close()
        assert time.monotonic() < deadline, "the soak ran past its time limit"
        expected = [step for step in plan if step[0] in ("good", "bad")]
        assert len(outcomes) == len(expected)  # every request sent got an answer
        statuses = {}
        for kind, status, (path, answer) in outcomes:
            statuses.setdefault((kind, status), 0)
            statuses[(kind, status)] += 1
            if kind == "bad":
                assert status == 422, answer
            elif status == 200:
                assert len(answer["images"][0]["boxes"]) == counts[path]
            else:
                assert status == 503 and "queue is full" in answer["error"], answer
        good = sum(n for (kind, status), n in statuses.items() if kind == "good" and status == 200)
        assert good > len(expected) // 2, statuses
        after = httpx.get(f"{url}/v1/models", timeout=30)  # still answering after the storm
        assert after.status_code == 200
        assert app.state.service.batcher.depth == 0

"""The benchmark's load generator against a real service: every request answered and counted by status, the
service's timings read from each 200, a transport error counted as status 0. Bounded: a few requests, each
with a timeout."""

from __future__ import annotations

import socket
from collections import Counter

import cv2
import numpy as np

from tphyolo.bench.serve.load import SERVICE_TIMINGS, LoopbackClient, closed_loop


def _jpeg(seed: int) -> bytes:
    image = np.random.default_rng(seed).integers(0, 255, (96, 128, 3), dtype=np.uint8)
    return cv2.imencode(".jpg", image)[1].tobytes()


def test_closed_loop_counts_each_answer_by_status_with_the_service_s_timings(server):
    good = [(_jpeg(i), "image/jpeg", {"conf": "0.5"}) for i in range(4)]
    bad = [(_jpeg(9), "image/jpeg", {"conf": "2"})]  # 422: conf past its bounds
    answers = []
    result = closed_loop(server, good + bad, concurrency=2, time_limit_s=120,
                         on_answer=lambda index, status, data: answers.append((index, status, data)))  # fmt: skip
    assert result.statuses == Counter({200: 4, 422: 1}) and len(result.latencies) == 4
    assert all(set(SERVICE_TIMINGS) <= set(t) for t in result.timings) and len(result.timings) == 4
    assert sorted(index for index, _, _ in answers) == [0, 1, 2, 3, 4]
    refused = next(data for index, _, data in answers if index == 4)
    assert "conf" in refused["error"]
    assert all(data["images"][0]["width"] == 128 for index, status, data in answers if status == 200)


def test_no_answer_is_status_0():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # nobody listens there once closed
    client = LoopbackClient(f"http://127.0.0.1:{port}", 5)
    assert client.post("/v1/detect", b"x", content_type="image/jpeg") == (0, None)
    assert client._connection is None  # dropped: the next request opens another

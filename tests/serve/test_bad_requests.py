"""Bad requests get their 4xx with one line naming the problem, and the service logs one line each; a full
queue answers 503 with Retry-After at once."""

from __future__ import annotations

import logging
import os
import signal
import socket
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

import cv2
import httpx
import numpy as np
import pytest
from tests.serve.conftest import serving

from tphyolo.data.files.image_limits import MAX_IMAGE_PIXELS
from tphyolo.serve import ServeConfig


def png_declaring(width: int, height: int) -> bytes:
    """A small PNG whose header declares width x height pixels (a decompression bomb when large)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 4096))
        + chunk(b"IEND", b"")
    )


def jpeg_bytes(seed: int = 0, shape: tuple[int, int] = (96, 128)) -> bytes:
    image = np.random.default_rng(seed).integers(0, 255, (*shape, 3), dtype=np.uint8)
    return cv2.imencode(".jpg", image)[1].tobytes()


JPEG = "image/jpeg"
CASES = {
    # name: (body, content type, query, status, words the one line holds)
    "decompression bomb": (
        png_declaring(50_000, 50_000),
        "image/png",
        {},
        413,
        ["2,500,000,000", f"{MAX_IMAGE_PIXELS:,}"],
    ),
    "truncated jpeg": (jpeg_bytes()[: len(jpeg_bytes()) // 2], JPEG, {}, 422, ["truncated JPEG"]),
    "empty body": (b"", JPEG, {}, 422, ["empty"]),
    "text file": (b"just some text\n", "text/plain", {}, 415, ["text/plain"]),
    "text named an image": (b"just some text\n", JPEG, {}, 422, ["cannot read image"]),
    "pixels that do not decode": (png_declaring(64, 64), "image/png", {}, 422, ["body: cannot decode image"]),
    "conf=2": (jpeg_bytes(), JPEG, {"conf": "2"}, 422, ["conf", "[0, 1]"]),
    "slice=10": (jpeg_bytes(), JPEG, {"slice": "10"}, 422, ["slice", "[32, "]),
    "max_det past any integer": (jpeg_bytes(), JPEG, {"max_det": "9" * 20}, 422, ["max_det:", "2147483647"]),
    "windows past the limit": (  # 924 model passes: the request that held the worker for minutes
        jpeg_bytes(shape=(180, 320)),
        JPEG,
        {"slice": "64", "overlap": "0.9", "conf": "0.001"},
        422,
        ["slice, overlap:", "924 model passes", "512 per request (--max-views)"],
    ),
    "boxes past the limit": (jpeg_bytes(), JPEG, {"max_det": "300000"}, 422, ["max_det:", "(--max-candidates)"]),
    "unknown option": (jpeg_bytes(), JPEG, {"confidence": "0.3"}, 422, ["confidence", "unknown option"]),
    "class the model lacks": (jpeg_bytes(), JPEG, {"classes": "0,7"}, 422, ["classes:", "got 7"]),
    "format": (jpeg_bytes(), JPEG, {"format": "xml"}, 422, ["format", "xml"]),
}


def _service_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("tphyolo.serve")]


@pytest.mark.parametrize("case", CASES)
def test_bad_request_gets_its_4xx_and_one_log_line(server, case, caplog):
    body, content_type, query, status, words = CASES[case]
    with caplog.at_level(logging.WARNING, logger="tphyolo.serve"):
        response = httpx.post(f"{server}/v1/detect", content=body, params=query,
                              headers={"Content-Type": content_type}, timeout=60)  # fmt: skip
    assert response.status_code == status, response.text
    message = response.json()["error"]
    assert "\n" not in message and "Traceback" not in response.text
    for word in words:
        assert word in message
    lines = _service_lines(caplog)
    assert len(lines) == 1 and message in lines[0] and str(status) in lines[0]


def test_an_image_the_worker_cannot_decode_is_named_beside_a_good_one(server):
    """A header that reads and pixels that do not (the worker decodes them): the request is 422 naming that
    file, the other image of the request is detected all the same, and the service answers the next request."""
    files = [("file", ("good.jpg", jpeg_bytes(), JPEG)), ("file", ("bad.png", png_declaring(64, 64), "image/png"))]
    response = httpx.post(f"{server}/v1/detect", files=files, timeout=60)
    assert response.status_code == 422 and response.json()["error"].startswith("bad.png: cannot decode image")
    again = httpx.post(f"{server}/v1/detect", content=jpeg_bytes(), headers={"Content-Type": JPEG}, timeout=60)
    assert again.status_code == 200 and again.json()["images"][0]["width"] == 128


def test_a_request_problem_crosses_the_worker_pipe_whole():
    """The worker answers an image it cannot decode with a RequestProblem, pickled to the server: status,
    line and headers arrive whole. Old behaviour: unpickling it raised TypeError (a missing argument)."""
    import pickle

    from tphyolo.serve.problems import RequestProblem, unavailable

    for problem in (RequestProblem(422, "bad.png: cannot decode image"), unavailable("the queue is full")):
        again = pickle.loads(pickle.dumps(problem))
        assert (again.status, again.message, again.headers) == (problem.status, problem.message, problem.headers)


def test_a_100_mb_body_is_refused_before_it_is_read(server, caplog):
    """Content-Length 100 MB: 413 after the headers and the first 64 KiB, the rest never sent."""
    host, port = server.removeprefix("http://").split(":")
    with caplog.at_level(logging.WARNING, logger="tphyolo.serve"), socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/detect HTTP/1.1\r\nHost: test\r\nContent-Type: image/jpeg\r\n"
                  b"Content-Length: 100000000\r\n\r\n" + b"\0" * 65536)  # fmt: skip
        s.settimeout(60)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"100,000,000 bytes" in answer and b"--max-body-mb" in answer
    assert len(_service_lines(caplog)) == 1


def test_a_body_past_the_limit_without_a_length_is_refused(server):
    """A chunked body (no Content-Length) is cut off at the limit (32 MB by default): 413."""
    chunks = (b"\xff" * 1_000_000 for _ in range(40))
    response = httpx.post(f"{server}/v1/detect", content=chunks, headers={"Content-Type": JPEG}, timeout=60)
    assert response.status_code == 413 and "more than 32,000,000 bytes" in response.json()["error"]


def test_a_request_of_more_images_than_the_queue_is_413(server, caplog):
    """65 files where 64 images fit in the queue: no retry can make it fit, so not a 503."""
    files = [("file", (f"{i}.jpg", jpeg_bytes(i, (16, 16)), JPEG)) for i in range(65)]
    with caplog.at_level(logging.WARNING, logger="tphyolo.serve"):
        response = httpx.post(f"{server}/v1/detect", files=files, timeout=60)
    assert response.status_code == 413 and "Retry-After" not in response.headers
    assert response.json()["error"] == "the request holds 65 images; at most 64 fit in the queue (--max-queue)"
    assert len(_service_lines(caplog)) == 1


@pytest.mark.slow
def test_a_full_queue_answers_503_at_once(tiny_weights, image_files):
    """The worker stopped (SIGSTOP) with an image in it per inference stream and one queued: one more request
    is answered 503 with Retry-After while the worker is still stopped -- at once, not after a timeout; once it
    goes on, the accepted requests are answered."""
    settings = ServeConfig(port=0, max_queue=1, max_batch=1, max_wait_ms=0)
    with serving(tiny_weights, serve=settings) as (url, app):
        service = app.state.service
        streams = service.worker.info.stream_count
        body = image_files[0].read_bytes()

        def post() -> httpx.Response:
            return httpx.post(f"{url}/v1/detect", content=body, headers={"Content-Type": "image/png"}, timeout=60)

        os.kill(service.worker.pid, signal.SIGSTOP)
        try:
            with ThreadPoolExecutor(streams + 1) as pool:
                accepted = []
                for count in range(1, streams + 1):  # one at a time: two queued at once would fill the queue of 1
                    accepted.append(pool.submit(post))
                    _wait_for(lambda count=count: service.batcher.in_flight == count)
                accepted.append(pool.submit(post))
                _wait_for(lambda: service.batcher.depth == 1)
                refused = post()
                assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
                assert "queue is full" in refused.json()["error"]
                assert not any(a.done() for a in accepted)
                os.kill(service.worker.pid, signal.SIGCONT)
                assert [a.result().status_code for a in accepted] == [200] * (streams + 1)
        finally:
            os.kill(service.worker.pid, signal.SIGCONT)


def _wait_for(condition, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)

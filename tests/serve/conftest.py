"""The detection service under test: a tiny checkpoint, distinct images, and real uvicorn servers on free
127.0.0.1 ports (in a thread of this process, the model in its worker process)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from tests.helpers import save_model_checkpoint

from tphyolo.infer.config import InferenceConfig
from tphyolo.models import build_model

NAMES = ["car", "van", "bus"]
IMGSZ = 128
SETTINGS = {"imgsz": IMGSZ, "conf": 0.001}  # an untrained model scores low: a low threshold gives detections
READY_TIMEOUT_S = 180.0  # the worker imports torch and loads the model; a busy 2-core machine is slow at it


@pytest.fixture(scope="session")
def tiny_weights(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    model = build_model("yolov5n", names=NAMES)
    return save_model_checkpoint(tmp_path_factory.mktemp("serve-weights") / "tiny.pt", model, NAMES)


@pytest.fixture(scope="session")
def image_files(tmp_path_factory) -> list[Path]:
    """Eight distinct images of two shapes (two letterbox buckets), PNG and JPEG."""
    folder = tmp_path_factory.mktemp("serve-images")
    rng = np.random.default_rng(7)
    paths = []
    for i in range(8):
        shape = (96, 128, 3) if i % 2 else (128, 80, 3)
        image = rng.integers(0, 255, shape, dtype=np.uint8)
        cv2.rectangle(image, (10 + i, 20), (50 + 3 * i, 70), (40 * i % 255, 200, 30), -1)
        path = folder / f"{i}.{'png' if i % 3 else 'jpg'}"
        cv2.imwrite(str(path), image)
        paths.append(path)
    return paths


def wait_ready(url: str, *, timeout: float = READY_TIMEOUT_S) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} was not ready within {timeout:.0f} s")


@contextmanager
def serving(weights, *, serve=None, **settings) -> Iterator[tuple[str, object]]:
    """A real uvicorn serving `create_app(weights, InferenceConfig(**SETTINGS | settings), serve=...)` on a
    free 127.0.0.1 port, in a thread; yields (url, app) once ready, stops it (as SIGTERM would) after."""
    from tphyolo.serve import ServeConfig, create_app

    serve = serve or ServeConfig(port=0)
    app = create_app(str(weights), InferenceConfig(**(SETTINGS | settings)), serve=serve, device="cpu")
    with running(app, serve) as url:
        yield url, app


@contextmanager
def running(app, serve) -> Iterator[str]:
    """A real uvicorn serving `app` with the settings `serve` (port 0) on a free 127.0.0.1 port, in a thread;
    yields its URL once ready, stops it (as SIGTERM would) after."""
    from tphyolo.serve.server import run_server

    ports: list[int] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=run_server, args=(app, serve), kwargs={"on_listening": lambda h, p: ports.append(p), "stop": stop},
        daemon=True,
    )  # fmt: skip
    thread.start()
    deadline = time.monotonic() + 30
    while not ports and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    assert ports, "the server did not listen"
    url = f"http://127.0.0.1:{ports[0]}"
    try:
        wait_ready(url)
        yield url
    finally:
        stop.set()
        thread.join(60)
        assert not thread.is_alive(), "the server did not stop"


@pytest.fixture(scope="session")
def server(tiny_weights) -> Iterator[str]:
    """The URL of a service of the tiny model at 128 px, conf 0.001."""
    with serving(tiny_weights) as (url, _):
        yield url

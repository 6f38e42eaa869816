"""The service on Ray Serve: two CPU replicas on a local Ray answer as the plain server does, and both answer."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from tests.serve.conftest import SETTINGS

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.serve.config import RayConfig, ServeConfig

MEDIA = {".png": "image/png", ".jpg": "image/jpeg"}
READY_TIMEOUT_S = 400.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_ray_replicas_answer_as_the_plain_server(server, tiny_weights, image_files):
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.serve")
    from tphyolo.serve.ray_app import serve_on_ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 2**20)
    settings = ServeConfig(host="127.0.0.1", port=free_port(), max_batch=4)
    spec = DetectorSpec.from_keywords(str(tiny_weights), InferenceConfig(**SETTINGS), device="cpu")
    stop, listening = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=serve_on_ray, args=(spec, settings, RayConfig(ray=True, replicas=2)),
        kwargs={"on_listening": lambda h, p: listening.set(), "stop": stop}, daemon=True,
    )  # fmt: skip
    thread.start()
    try:
        assert listening.wait(READY_TIMEOUT_S), "Ray Serve did not get ready"
        url = f"http://127.0.0.1:{settings.port}"
        deadline = time.monotonic() + READY_TIMEOUT_S
        pids = set()
        while len(pids) < 2 and time.monotonic() < deadline:  # the second replica may still be warming up
            worker = httpx.get(f"{url}/healthz", timeout=30).json()["worker"]
            if worker["ready"]:
                pids.add(worker["pid"])
        assert len(pids) == 2, "not both replicas answered"
        for path in image_files[:4]:
            headers = {"Content-Type": MEDIA[path.suffix]}
            plain = httpx.post(f"{server}/v1/detect", content=path.read_bytes(), headers=headers, timeout=60).json()
            on_ray = httpx.post(f"{url}/v1/detect", content=path.read_bytes(), headers=headers, timeout=60).json()
            assert "images" in on_ray, on_ray
            assert on_ray["images"] == plain["images"] and on_ray["model"] == plain["model"]
        refused = httpx.post(f"{url}/v1/detect", content=b"text", headers={"Content-Type": "text/plain"}, timeout=60)
        assert refused.status_code == 415 and "text/plain" in refused.json()["error"]
    finally:
        stop.set()
        thread.join(120)
        ray.shutdown()


def test_a_replica_is_created_once_its_model_is_ready(monkeypatch):
    """Ray sends requests to a replica once its constructor returns: it returns only once the model is loaded
    and warm. Old behaviour: it returned at once, and a replica added by autoscaling answered 503 to its share of
    the load while its model loaded (942 of 1,059 answers in a measured scale-out)."""
    from tphyolo.serve import ray_app

    class LoadingService:
        def __init__(self, spec, settings, *, in_process) -> None:
            self.failure, self.polls, self.batcher = None, 0, self

        @property
        def ready(self) -> bool:
            self.polls += 1
            return self.polls > 3

        def start(self) -> None:
            pass

    monkeypatch.setattr(ray_app, "Service", LoadingService)
    monkeypatch.setattr(ray_app, "build_app", lambda service, lifespan: None)
    monkeypatch.setattr(ray_app, "READY_POLL_S", 0.001)
    replica = ray_app.DetectionReplica(DetectorSpec(("m.pt",)), ServeConfig())
    assert replica.service.polls == 4

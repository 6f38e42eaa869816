"""`run_serve` from Python, without argparse: a job serves its models with its defaults on a real 127.0.0.1
server (a free port, in a thread) until told to stop."""

from __future__ import annotations

import threading

import httpx
import pytest
from tests.serve.conftest import NAMES, wait_ready

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.runtime.console import RunEvents
from tphyolo.serve import ServeConfig, ServeJob, run_serve


@pytest.mark.slow
def test_a_job_serves_its_models_with_its_defaults_until_stopped(tiny_weights, image_files):
    job = ServeJob(DetectorSpec((str(tiny_weights),), inference=InferenceConfig(imgsz=128, conf=0.002), device="cpu"),
                   serve=ServeConfig(port=0, max_batch=2))  # fmt: skip
    ports: list[int] = []
    stop = threading.Event()
    told = {"events": RunEvents(listening=lambda host, port: ports.append(port)), "stop": stop}
    thread = threading.Thread(target=run_serve, args=(job,), kwargs=told, daemon=True)
    thread.start()
    try:
        for _ in range(300):  # at most 30 s to bind the socket (the model loads after)
            if ports or not thread.is_alive():
                break
            stop.wait(0.1)
        assert ports, "the server did not listen"
        url = f"http://127.0.0.1:{ports[0]}"
        wait_ready(url)
        [model] = httpx.get(f"{url}/v1/models").json()["models"]
        assert model["classes"] == NAMES and model["imgsz"] == 128 and model["defaults"]["conf"] == 0.002
        body = image_files[1].read_bytes()
        answer = httpx.post(f"{url}/v1/detect", content=body, headers={"Content-Type": "image/png"}, timeout=120)
        assert answer.status_code == 200 and answer.json()["model"]["name"] == "tiny.pt"
        assert (answer.json()["images"][0]["width"], answer.json()["images"][0]["height"]) == (128, 96)
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive(), "the server did not stop"

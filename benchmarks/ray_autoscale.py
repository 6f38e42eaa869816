"""Ray Serve autoscaling under a bounded load step: one replica, a step of callers, two replicas, and back.

    python benchmarks/ray_autoscale.py --weights best.pt --img 640 --image scene.jpg --json ray.json

Serves `--weights` with `tphyolo.serve.ray_app.serve_on_ray` on a local Ray at 127.0.0.1 (loopback only),
autoscaling between 1 and 2 replicas (Ray Serve's own policy: `--target` ongoing requests per replica, scaling up
after `--upscale-delay` s and down after `--downscale-delay` s of a lower demand), and loads it in three closed-loop
phases, each bounded in requests and in seconds:

- before: `--low` callers, `--requests` requests, one replica;
- the step: `--high` callers until `--step-requests` are answered or `--step-limit` s pass; its answers are split
  at the moment Ray reports the second replica running (one replica / two replicas);
- after: the load stopped until Ray is back to one replica (at most `--settle-limit` s), then as before.

Reported per phase: answers by status, and images/s and latency p50/p99 (client side, ms) of the 200 answers;
the replica count Ray reports, sampled every second, with the seconds since the start of the step; the machine's
load and cores (`machine_load`).
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np

from tphyolo.bench.serve.load import bench_image
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.runtime.decisions import machine_load
from tphyolo.serve.config import RayConfig, ServeConfig
from tphyolo.serve.ray_app import DEPLOYMENT, serve_on_ray


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def running_replicas() -> int:
    """Replicas Ray Serve reports RUNNING for the deployment."""
    from ray import serve

    application = serve.status().applications.get(DEPLOYMENT)
    if application is None or DEPLOYMENT not in application.deployments:
        return 0
    states = application.deployments[DEPLOYMENT].replica_states
    return int(sum(n for state, n in states.items() if str(state).endswith("RUNNING")))


def load(url: str, body: bytes, *, callers: int, requests: int, time_limit_s: float) -> list[tuple[float, float, int]]:
    """(answered at, latency s, status) of each of `requests` closed-loop requests from `callers` clients (status
    0: no HTTP answer), stopped after `time_limit_s` seconds."""
    answers: list[tuple[float, float, int]] = []
    lock = threading.Lock()
    left = iter(range(requests))
    deadline = time.monotonic() + time_limit_s

    def client() -> None:
        with httpx.Client(timeout=120) as http:
            while time.monotonic() < deadline:
                with lock:
                    if next(left, None) is None:
                        return
                start = time.monotonic()
                try:
                    status = http.post(f"{url}/v1/detect", content=body,
                                       headers={"Content-Type": "image/jpeg"}).status_code  # fmt: skip
                except httpx.HTTPError:
                    status = 0
                with lock:
                    answers.append((time.monotonic(), time.monotonic() - start, status))

    threads = [threading.Thread(target=client) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def summary(answers: list[tuple[float, float, int]], seconds: float) -> dict:
    """Answers by status; images/s, p50 and p99 (ms) of the 200 answers over `seconds`."""
    statuses = dict(Counter(status for _, _, status in answers))
    good = np.array([latency for _, latency, status in answers if status == 200]) * 1000
    if not len(good):
        return {"statuses": statuses}
    return {
        "statuses": statuses,
        "images_per_s": round(len(good) / seconds, 2) if seconds > 0 else None,
        "p50_ms": round(float(np.percentile(good, 50))),
        "p99_ms": round(float(np.percentile(good, 99))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True)
    parser.add_argument("--img", type=int, default=640)
    parser.add_argument("--image", help="a JPEG (default: a generated 1280x720 scene)")
    parser.add_argument("--low", type=int, default=1, help="callers before and after the step")
    parser.add_argument("--high", type=int, default=8, help="callers during the step")
    parser.add_argument("--requests", type=int, default=20, help="requests before and after")
    parser.add_argument("--step-requests", type=int, default=400)
    parser.add_argument("--step-limit", type=float, default=240.0)
    parser.add_argument("--settle-limit", type=float, default=120.0)
    parser.add_argument("--target", type=float, default=2.0, help="Ray Serve target_ongoing_requests")
    parser.add_argument("--upscale-delay", type=float, default=5.0)
    parser.add_argument("--downscale-delay", type=float, default=15.0)
    parser.add_argument("--json")
    args = parser.parse_args()

    body, _ = bench_image(args.image)
    settings = ServeConfig(host="127.0.0.1", port=free_port())
    spec = DetectorSpec.from_keywords(args.weights, InferenceConfig(imgsz=args.img), device="cpu")
    cluster = RayConfig(ray=True, replicas=1, min_replicas=1, max_replicas=2)
    autoscaling = {"target_ongoing_requests": args.target, "upscale_delay_s": args.upscale_delay,
                   "downscale_delay_s": args.downscale_delay}  # fmt: skip
    stop, listening = threading.Event(), threading.Event()
    server = threading.Thread(target=serve_on_ray, args=(spec, settings, cluster),
                              kwargs={"on_listening": lambda h, p: listening.set(), "stop": stop,
                                      "autoscaling": autoscaling}, daemon=True)  # fmt: skip
    started = time.monotonic()
    server.start()
    report: dict = {"load_before": machine_load(), "settings": vars(args)}
    samples: list[tuple[float, int]] = []
    sampling = threading.Event()
    try:
        if not listening.wait(600):
            raise SystemExit("Ray Serve did not get ready within 600 s")
        report["ready_s"] = round(time.monotonic() - started, 1)
        url = f"http://{settings.host}:{settings.port}"
        print(f"ready in {report['ready_s']} s at {url}; replicas {running_replicas()}", flush=True)
        load(url, body, callers=args.low, requests=3, time_limit_s=60)  # warm-up
        before = time.monotonic()
        report["before"] = summary(load(url, body, callers=args.low, requests=args.requests, time_limit_s=120),
                                   time.monotonic() - before)  # fmt: skip
        print("before", report["before"], flush=True)

        step_start = time.monotonic()

        def sample() -> None:
            while not sampling.is_set():
                samples.append((round(time.monotonic() - step_start, 1), running_replicas()))
                sampling.wait(1.0)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        step = load(url, body, callers=args.high, requests=args.step_requests, time_limit_s=args.step_limit)
        step_end = time.monotonic()
        two = next((step_start + t for t, n in samples if n >= 2), None)
        one_part = [a for a in step if two is None or a[0] < two]
        two_part = [a for a in step if two is not None and a[0] >= two]
        report["step_one_replica"] = summary(one_part, (two or step_end) - step_start)
        report["step_two_replicas"] = summary(two_part, step_end - two) if two is not None else {}
        report["second_replica_running_at_s"] = None if two is None else round(two - step_start, 1)
        print("step, one replica", report["step_one_replica"], flush=True)
        print("step, two replicas", report["step_two_replicas"], "from", report["second_replica_running_at_s"], "s",
              flush=True)  # fmt: skip
        settle = time.monotonic()
        while running_replicas() > 1 and time.monotonic() - settle < args.settle_limit:
            time.sleep(1.0)
        report["back_to_one_after_s"] = round(time.monotonic() - step_end, 1) if running_replicas() <= 1 else None
        after = time.monotonic()
        report["after"] = summary(load(url, body, callers=args.low, requests=args.requests, time_limit_s=120),
                                  time.monotonic() - after)  # fmt: skip
        report["after_replicas"] = running_replicas()
        print("after", report["after"], "replicas", report["after_replicas"], "back to one after",
              report["back_to_one_after_s"], "s", flush=True)  # fmt: skip
    finally:
        sampling.set()
        report["replicas"] = samples
        report["load_after"] = machine_load()
        stop.set()
        server.join(120)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

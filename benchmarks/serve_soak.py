"""A soak of the detection service: many requests, some bad, at a fixed concurrency; nothing lost, memory flat.

    python benchmarks/serve_soak.py --weights best.pt --requests 10000 --concurrency 16 --bad 0.1 --time-limit 600

Starts `tphyolo serve` on 127.0.0.1 (`tphyolo.bench.serve.load.ServerProcess`), sends `--warmup` good requests, reads
the resident memory (VmRSS) of the server and of its inference worker, then sends `--requests` closed-loop
requests from `--concurrency` clients (`closed_loop`, bounded by `--time-limit` seconds), a `--bad` fraction
of them bytes that are not an image (seeded). The image is a generated 640x480 scene served at `--img 640` by
default; `--requests` and `--time-limit` size the run to the machine. Reported: answers by status for good
and bad requests, lost answers (requests sent that got no HTTP answer), good answers whose detections differ
from the first good answer's (the same image each time), latency p50/p99 of the good answers, and the memory of
both processes after the warm-up, at the end, and as the mean of samples (one per 0.1 % of the requests) over the
first and the last 10 % of the run. The baseline of memory growth is the warm level, and the first 10 %,
measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
from collections import Counter
from pathlib import Path

import httpx

from tphyolo.bench.serve.load import ServerProcess, bench_image, closed_loop, rss_mb


def tenths(samples: list[tuple[int, float, float]], sent: int) -> dict:
    """Mean resident memory (MB) of server and worker over the samples of the first and the last 10 % of the
    `sent` requests, and the growth from one to the other."""
    first = [s for s in samples if s[0] <= 0.1 * sent]
    last = [s for s in samples if s[0] >= 0.9 * sent]
    if not first or not last:
        return {}

    def mean(part: list, i: int) -> float:
        return round(sum(s[i] for s in part) / len(part), 1)

    spans = {"first_10pct": first, "last_10pct": last}
    rss = {name: {"server": mean(part, 1), "worker": mean(part, 2)} for name, part in spans.items()}
    growth = {k: round(rss["last_10pct"][k] - rss["first_10pct"][k], 1) for k in ("server", "worker")}
    return {"rss_mb_first_last_10pct": rss, "rss_growth_first_to_last_10pct_mb": growth}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", nargs="+", required=True)
    parser.add_argument("--img", type=int, default=640)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--bad", type=float, default=0.1, help="fraction of bad requests")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--time-limit", type=float, default=600.0, help="seconds at most for the soak")
    parser.add_argument("--image", help="the image sent (default: a generated scene of --size)")
    parser.add_argument("--size", default="640x480", help="WxH of the generated scene")
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()

    width, height = (int(side) for side in args.size.split("x"))
    body, _ = bench_image(args.image, size=(height, width))
    rng = random.Random(0)
    good = (body, "image/jpeg", {})
    bad = (b"this is not an image\n" * 20, "image/jpeg", {})
    requests = [bad if rng.random() < args.bad else good for _ in range(args.requests)]
    server = ServerProcess(["--weights", *args.weights, "--img", str(args.img), "--device", "cpu",
                            "--timeout", "600", "--max-queue", str(4 * args.concurrency)])  # fmt: skip
    with server as url:
        worker = httpx.get(f"{url}/healthz").json()["worker"]["pid"]
        closed_loop(url, [good] * args.warmup, concurrency=args.concurrency, time_limit_s=args.time_limit)
        warm = {"server": rss_mb(server.process.pid), "worker": rss_mb(worker)}
        print(f"warm: server {warm['server']:.0f} MB, worker {warm['worker']:.0f} MB", flush=True)
        by_kind: dict[str, Counter] = {"good": Counter(), "bad": Counter()}
        reference: list = []
        differing = [0]
        lock = threading.Lock()
        samples: list[tuple[int, float, float]] = []  # (answers so far, server MB, worker MB)
        every = max(1, args.requests // 1000)  # a sample per 0.1 % of the planned requests

        def on_answer(index: int, status: int, data) -> None:
            kind = "bad" if requests[index] is bad else "good"
            with lock:
                by_kind[kind][status] += 1
                answers = sum(sum(c.values()) for c in by_kind.values())
                if answers % every == 0:
                    samples.append((answers, rss_mb(server.process.pid), rss_mb(worker)))
                if kind == "good" and status == 200:
                    boxes = data["images"][0]["boxes"]
                    if not reference:
                        reference.append(boxes)
                    elif len(boxes) != len(reference[0]):
                        differing[0] += 1

        result = closed_loop(url, requests, concurrency=args.concurrency, time_limit_s=args.time_limit,
                             on_answer=on_answer)  # fmt: skip
        end = {"server": rss_mb(server.process.pid), "worker": rss_mb(worker)}
        worker_now = httpx.get(f"{url}/healthz").json()["worker"]
    answered = sum(sum(c.values()) - c[0] for c in by_kind.values())
    sent = sum(sum(c.values()) for c in by_kind.values())
    report = {
        "requests_sent": sent, "requests_planned": args.requests, "concurrency": args.concurrency,
        "seconds": round(result.seconds, 1), "throughput_images_per_s": round(result.throughput, 2),
        "good_by_status": dict(by_kind["good"]), "bad_by_status": dict(by_kind["bad"]),
        "lost_answers": sent - answered, "good_answers_differing": differing[0],
        "rss_mb_warm": {k: round(v, 1) for k, v in warm.items()},
        "rss_mb_end": {k: round(v, 1) for k, v in end.items()},
        "rss_growth_mb": {k: round(end[k] - warm[k], 1) for k in warm}, "worker_restarts": worker_now["restarts"],
        "latency_ms": {"p50": result.percentile_ms(50), "p99": result.percentile_ms(99)},
        **tenths(samples, sent),
    }  # fmt: skip
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""`tphyolo bench serve`: closed-loop load on the detection service, dynamic batching against `--max-batch 1`.

For each `max_batch` (the service's default and 1, each a `tphyolo serve` on 127.0.0.1, side by side; or one
server already running on this machine, `url`) and each concurrency C: C clients send the same image back to
back, `requests` in all (in `rounds` slices alternating between the servers, each at most `time_limit_s`),
each waiting for its answer before the next (closed loop).
Measured: throughput (images/s), latency p50/p95/p99, answers by status, mean batch size (from the service's
/metrics). The baseline of the per-image cost is `Predictor` on the same image in this process, one at a time
(`tphyolo predict`'s path without the HTTP), median of `baseline_repeats`.

Rows (`tphyolo.bench.report.Row`): `serve` per (max_batch, C): ours_ms = ms per image (1000 / throughput);
baseline_ms = the same C with max_batch 1 (so speedup = the throughput batching buys), or predict's per-image
time for the max_batch 1 rows; `serve p99` at C=1: the p99 latency against predict's per-image time.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from tphyolo.bench.report import Row, significant
from tphyolo.predict.predictor import Predictor

LOOPBACK = ("127.0.0.1", "localhost", "::1")
READY_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class LoadResult:
    """One closed-loop run: seconds, latencies (s) of the 200 answers, answers by status, batches seen."""

    seconds: float
    latencies: list[float]
    statuses: Counter
    mean_batch: float | None

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds > 0 else 0.0

    def merged(self, other: LoadResult) -> LoadResult:
        """This run and `other` as one (seconds added, batch sizes weighted by the images of each)."""
        sizes = [(r.mean_batch, len(r.latencies)) for r in (self, other) if r.mean_batch is not None]
        images = sum(n for _, n in sizes)
        mean = significant(sum(m * n for m, n in sizes) / images) if images else None
        return LoadResult(self.seconds + other.seconds, self.latencies + other.latencies,
                          self.statuses + other.statuses, mean)  # fmt: skip

    def percentile_ms(self, q: float) -> float | None:
        return significant(1000 * float(np.percentile(self.latencies, q))) if self.latencies else None


def check_loopback(url: str) -> str:
    """`url` without a trailing slash; ValueError unless it is http on a loopback address."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK:
        raise ValueError(f"--url {url}: load goes to a loopback address only (http://127.0.0.1:PORT)")
    return url.rstrip("/")


def _batch_totals(url: str, client) -> tuple[float, float]:
    """(sum, count) of the service's batch-size histogram."""
    text = client.get(f"{url}/metrics").text
    values = dict(re.findall(r"^tphyolo_batch_size_(sum|count) (\S+)$", text, re.MULTILINE))
    return float(values.get("sum", 0)), float(values.get("count", 0))


def closed_loop(
    url: str,
    requests: Sequence[tuple[bytes, str, dict]],
    *,
    concurrency: int,
    time_limit_s: float,
    timeout_s: float = 120.0,
    on_answer: Callable[[int, int, object], None] | None = None,
) -> LoadResult:
    """Send `requests` (body, content type, query) to `url`/v1/detect from `concurrency` clients, each waiting
    for its answer before taking the next, until all are sent or `time_limit_s` passed. `on_answer(index,
    status, json or None)` sees each answer. Status 0 counts a request that got no answer (a transport error)."""
    import httpx

    lock = threading.Lock()
    position = iter(range(len(requests)))
    latencies: list[float] = []
    statuses: Counter = Counter()
    deadline = time.monotonic() + time_limit_s

    def client_loop() -> None:
        with httpx.Client(timeout=timeout_s) as client:
            while time.monotonic() < deadline:
                with lock:
                    index = next(position, None)
                if index is None:
                    return
                body, content_type, query = requests[index]
                start = time.perf_counter()
                try:
                    response = client.post(f"{url}/v1/detect", content=body, params=query,
                                           headers={"Content-Type": content_type})  # fmt: skip
                    status, data = response.status_code, response.json()
                except (httpx.HTTPError, ValueError):
                    status, data = 0, None
                elapsed = time.perf_counter() - start
                with lock:
                    statuses[status] += 1
                    if status == 200:
                        latencies.append(elapsed)
                if on_answer is not None:
                    on_answer(index, status, data)

    with httpx.Client() as client:
        batch_sum, batch_count = _batch_totals(url, client)
        start = time.perf_counter()
        threads = [threading.Thread(target=client_loop) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - start
        after_sum, after_count = _batch_totals(url, client)
    batches = after_count - batch_count
    mean_batch = significant((after_sum - batch_sum) / batches) if batches else None
    return LoadResult(seconds, latencies, statuses, mean_batch)


class ServerProcess:
    """`tphyolo serve` in a child process on a free 127.0.0.1 port, with `flags`; a context manager giving
    its URL once ready, stopped with SIGTERM on exit."""

    def __init__(self, flags: Sequence[str]) -> None:
        self.flags = list(flags)
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> str:
        import httpx

        command = [sys.executable, "-m", "tphyolo", "serve", "--host", "127.0.0.1", "--port", "0", *self.flags]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        if found is None:
            self.__exit__()
            raise RuntimeError(f"tphyolo serve did not start: {line.strip() or 'no output'}")
        url = found.group(0)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while httpx.get(f"{url}/readyz").status_code != 200:
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.__exit__()
                raise RuntimeError("tphyolo serve did not get ready")
            time.sleep(0.2)
        return url

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def bench_image(path: str | None, *, size: tuple[int, int] = (720, 1280), seed: int = 0) -> tuple[bytes, np.ndarray]:
    """The JPEG bytes and decoded image of `path`, or of a generated scene (noise and boxes) of `size` (h, w)."""
    import cv2

    if path is not None:
        data = Path(path).read_bytes()
        return data, cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    rng = np.random.default_rng(seed)
    image = rng.integers(60, 200, (*size, 3), dtype=np.uint8)
    for _ in range(40):
        x, y = int(rng.integers(0, size[1] - 40)), int(rng.integers(0, size[0] - 40))
        cv2.rectangle(image, (x, y), (x + int(rng.integers(8, 40)), y + int(rng.integers(8, 40))),
                      tuple(int(c) for c in rng.integers(0, 255, 3)), -1)  # fmt: skip
    data = cv2.imencode(".jpg", image)[1].tobytes()
    return data, cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


@dataclass(frozen=True)
class ServeBenchSettings:
    """weights: what the servers load (paths); imgsz; concurrency levels; requests per level; max_batches:
    the servers started (None: the service's default); url: a running loopback server instead (one pass);
    image: a file (default: a generated 1280x720 scene); time_limit_s per slice of a level; rounds: slices
    per level and server, alternating between the servers."""

    weights: tuple[str, ...]
    imgsz: int = 640
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    requests: int = 200
    max_batches: tuple[int | None, ...] = (None, 1)
    url: str | None = None
    image: str | None = None
    time_limit_s: float = 300.0
    rounds: int = 2
    baseline_repeats: int = 10
    server_flags: tuple[str, ...] = field(default=("--device", "cpu", "--timeout", "600"))  # no 504 under load


def predict_ms(settings: ServeBenchSettings, image: np.ndarray) -> float:
    """Median ms of `Predictor` on `image`, one call per image (the baseline)."""

    predictor = Predictor(list(settings.weights), imgsz=settings.imgsz, device="cpu")
    predictor(image)  # warm-up
    times = []
    for _ in range(settings.baseline_repeats):
        start = time.perf_counter()
        predictor(image)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def bench_serve(settings: ServeBenchSettings, *, log: Callable[[str], None] = print) -> list[Row]:
    """The rows of the module docstring. The servers run side by side (one idle while the other is loaded)
    and each level is measured in `rounds` alternating slices, so that a machine whose load drifts (other
    jobs) weighs on both alike."""
    import contextlib

    body, image = bench_image(settings.image)
    baseline = predict_ms(settings, image)
    log(f"predict (in-process Predictor, one image at a time): {baseline:.1f} ms per image")
    results: dict[tuple[int | None, int], LoadResult] = {}
    passes = [None] if settings.url is not None else list(settings.max_batches)
    with contextlib.ExitStack() as stack:
        urls = {}
        for max_batch in passes:
            flags = ["--weights", *settings.weights, "--img", str(settings.imgsz), *settings.server_flags]
            flags += [] if max_batch is None else ["--max-batch", str(max_batch)]
            server = _Running(settings.url) if settings.url is not None else ServerProcess(flags)
            urls[max_batch] = stack.enter_context(server)
        for concurrency in settings.concurrency:
            share = max(settings.requests // settings.rounds, 1)
            load = [(body, "image/jpeg", {})] * share
            for url in urls.values():  # warm-up at this concurrency
                closed_loop(url, load[: max(concurrency, 4)], concurrency=concurrency, time_limit_s=60)
            for _ in range(settings.rounds):
                for max_batch, url in urls.items():
                    part = closed_loop(url, load, concurrency=concurrency, time_limit_s=settings.time_limit_s)
                    key = (max_batch, concurrency)
                    results[key] = part if key not in results else results[key].merged(part)
            for max_batch in urls:
                result = results[(max_batch, concurrency)]
                log(f"max_batch {max_batch or 'default'} concurrency {concurrency}: {result.throughput:.2f} "
                    f"images/s, p50 {result.percentile_ms(50)} ms, p99 {result.percentile_ms(99)} ms, "
                    f"mean batch {result.mean_batch}, statuses {dict(result.statuses)}")  # fmt: skip
    return _rows(results, baseline)


def _rows(results: dict[tuple[int | None, int], LoadResult], baseline_ms: float) -> list[Row]:
    rows = []
    for (max_batch, concurrency), result in results.items():
        ours = significant(1000 / result.throughput) if result.throughput else None
        plain = results.get((1, concurrency))
        if max_batch == 1 or plain is None or not plain.throughput:
            base, base_name = significant(baseline_ms), "predict per image"
        else:
            base, base_name = significant(1000 / plain.throughput), "max_batch 1, same concurrency"
        extra = {
            "concurrency": concurrency, "max_batch": max_batch or "default",
            "throughput": significant(result.throughput), "p50_ms": result.percentile_ms(50),
            "p95_ms": result.percentile_ms(95), "p99_ms": result.percentile_ms(99),
            "errors": {str(s): n for s, n in sorted(result.statuses.items()) if s != 200},
            "mean_batch": result.mean_batch, "requests": sum(result.statuses.values()), "baseline": base_name,
        }  # fmt: skip
        rows.append(Row("serve", f"c={concurrency} max_batch={max_batch or 'default'}", ours, base, extra=extra))
    single = results.get((None, 1))
    if single is not None and single.latencies:
        rows.append(Row("serve p99", "c=1 max_batch=default", single.percentile_ms(99), significant(baseline_ms),
                        extra={"baseline": "predict per image"}))  # fmt: skip
    return rows


class _Running:
    """A server already running at `url` (loopback only), as a context manager like ServerProcess."""

    def __init__(self, url: str) -> None:
        self.url = check_loopback(url)

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *exc) -> None:
        pass

"""Closed-loop load on a detection service on this machine, and what is measured of it.

    with ServerProcess(["--weights", "best.pt", "--img", "640"]) as url:
        result = closed_loop(url, [(body, "image/jpeg", {})] * 48, concurrency=16, time_limit_s=60)
        result.throughput, result.percentile_ms(99), result.stage_ms("queue_ms")

Each client sends its next request once its last one is answered, until every request is sent or the time
limit passed (so a run is bounded in count and in time). Only loopback addresses are loaded.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import numpy as np

from tphyolo.bench.report import significant
from tphyolo.errors import InputError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
READY_TIMEOUT_S = 300.0
SERVICE_TIMINGS = ("queue_ms", "inference_ms", "total_ms")  # what a 200 answer's "timings" hold


@dataclass(frozen=True)
class LoadResult:
    """One closed-loop run: seconds, latencies (s) of the 200 answers as the client saw them, answers by
    status, mean batch size (from /metrics), and per 200 answer the service's own timings (SERVICE_TIMINGS)."""

    seconds: float
    latencies: list[float]
    statuses: Counter
    mean_batch: float | None
    timings: list[dict[str, float]] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds > 0 else 0.0

    def merged(self, other: LoadResult) -> LoadResult:
        """This run and `other` as one (seconds added, batch sizes weighted by the images of each)."""
        sizes = [(r.mean_batch, len(r.latencies)) for r in (self, other) if r.mean_batch is not None]
        images = sum(n for _, n in sizes)
        mean = significant(sum(m * n for m, n in sizes) / images) if images else None
        return LoadResult(self.seconds + other.seconds, self.latencies + other.latencies,
                          self.statuses + other.statuses, mean, self.timings + other.timings)  # fmt: skip

    def percentile_ms(self, q: float) -> float | None:
        return significant(1000 * float(np.percentile(self.latencies, q))) if self.latencies else None

    def stage_ms(self, name: str) -> float | None:
        """Median of the service's timing `name` (SERVICE_TIMINGS) over the answers; None without any."""
        values = [t[name] for t in self.timings if name in t]
        return significant(statistics.median(values)) if values else None


class Progress:
    """A line `label: N/total answers, S s` at most every `every_s` seconds and at the last answer; callable
    from many threads, once per answer."""

    def __init__(self, label: str, total: int, *, log: Callable[[str], None], every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.label, self.total, self.log, self.every_s, self.clock = label, total, log, every_s, clock
        self.start = self.last = clock()
        self.done = 0
        self._lock = threading.Lock()

    def __call__(self, *_answer) -> None:
        with self._lock:
            self.done += 1
            now = self.clock()
            if self.done < self.total and now - self.last < self.every_s:
                return
            self.last = now
            self.log(f"{self.label}: {self.done}/{self.total} answers, {now - self.start:.0f} s")


def check_loopback(url: str) -> str:
    """`url` without a trailing slash; ValueError unless it is http on a loopback address."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK:
        raise InputError(f"--url {url}: load goes to a loopback address only (http://127.0.0.1:PORT)")
    return url.rstrip("/")


def _batch_totals(url: str, client) -> tuple[float, float]:
    """(sum, count) of the service's batch-size histogram."""
    text = client.get(f"{url}/metrics").text
    values = dict(re.findall(r"^tphyolo_batch_size_(sum|count) (\S+)$", text, re.MULTILINE))
    return float(values.get("sum", 0)), float(values.get("count", 0))


class LoopbackClient:
    """One keep-alive HTTP/1.1 connection to a loopback service, from the standard library's `http.client`: the
    load generator's client. It runs on the cores the service runs on, so its cost is the service's loss: httpx
    took 24-29 ms of CPU per request of a 0.5 MB JPEG on a 2-core Xeon, this 0.8-0.9 ms."""

    def __init__(self, url: str, timeout_s: float) -> None:
        parts = urlsplit(check_loopback(url))
        self.host, self.port, self.timeout_s = parts.hostname, parts.port or 80, timeout_s
        self._connection: http.client.HTTPConnection | None = None

    def post(self, path: str, body: bytes, *, content_type: str, query: Mapping | None = None) -> tuple[int, object]:
        """(status, the answer's JSON) of a POST of `body` to `path`; (0, None) for no answer (a transport error
        or a timeout: the connection is then dropped, the next request opens another) or one that is not JSON."""
        target = f"{path}?{urlencode(query, doseq=True)}" if query else path
        if self._connection is None:
            self._connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            self._connection.request("POST", target, body=body, headers={"Content-Type": content_type})
            response = self._connection.getresponse()
            status, text = response.status, response.read()
        except (http.client.HTTPException, OSError):
            self.close()
            return 0, None
        try:
            return status, json.loads(text)
        except ValueError:
            return 0, None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


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
    status, json or None)` sees each answer. Status 0 counts a request that got no answer (a transport error).
    Each client is a `LoopbackClient`, cheap enough not to take the service's cores."""
    import httpx

    lock = threading.Lock()
    position = iter(range(len(requests)))
    latencies: list[float] = []
    timings: list[dict[str, float]] = []
    statuses: Counter = Counter()
    deadline = time.monotonic() + time_limit_s

    def client_loop() -> None:
        with contextlib.closing(LoopbackClient(url, timeout_s)) as client:
            while time.monotonic() < deadline:
                with lock:
                    index = next(position, None)
                if index is None:
                    return
                body, content_type, query = requests[index]
                start = time.perf_counter()
                status, data = client.post("/v1/detect", body, content_type=content_type, query=query)
                elapsed = time.perf_counter() - start
                with lock:
                    statuses[status] += 1
                    if status == 200:
                        latencies.append(elapsed)
                        timings.append({k: float(v) for k, v in data.get("timings", {}).items()})
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
    return LoadResult(seconds, latencies, statuses, mean_batch, timings)


def rss_mb(pid: int, *, peak: bool = False) -> float:
    """Resident memory of process `pid` in MiB (VmRSS of /proc/PID/status; with `peak`, VmHWM: the most it
    held so far)."""
    key = "VmHWM:" if peak else "VmRSS:"
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    raise InputError(f"/proc/{pid}/status: no {key} line")


class ServerProcess:
    """`tphyolo serve` in a child process on a free 127.0.0.1 port, with `flags` (and `env`, the child's
    environment when given); a context manager giving its URL once ready, stopped with SIGTERM on exit.
    `worker_pid`: its inference worker's process, once ready."""

    def __init__(self, flags: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        self.flags = list(flags)
        self.env = None if env is None else dict(env)
        self.process: subprocess.Popen | None = None
        self.worker_pid: int | None = None

    def __enter__(self) -> str:
        import httpx

        command = [sys.executable, "-m", "tphyolo", "serve", "--host", "127.0.0.1", "--port", "0", *self.flags]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=self.env)
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
        self.worker_pid = httpx.get(f"{url}/healthz").json()["worker"]["pid"]
        return url

    def memory_mb(self, *, peak: bool = False) -> float | None:
        """Resident MiB of the server and its worker together (`rss_mb`); None once either has ended."""
        if self.process is None or self.worker_pid is None:
            return None
        try:
            return rss_mb(self.process.pid, peak=peak) + rss_mb(self.worker_pid, peak=peak)
        except OSError:
            return None

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

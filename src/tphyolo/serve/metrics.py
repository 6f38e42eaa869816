"""The service's Prometheus metrics, in a registry of its own (one per app, so that several apps in a process
count apart), served as text by `GET /metrics`.

- `tphyolo_requests_total{status}`: requests answered, by HTTP status;
- `tphyolo_request_seconds`: time from a request's arrival to its answer (histogram);
- `tphyolo_queue_seconds`, `tphyolo_inference_seconds`: per image, waiting; per batch, in the worker;
- `tphyolo_batch_size`: images per forward pass (histogram);
- `tphyolo_images_total`: images detected; `tphyolo_images_per_second`: over the last IMAGES_WINDOW_S;
- `tphyolo_queue_depth`: images waiting now; `tphyolo_worker_restarts_total`: inference workers restarted.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from tphyolo.imports import require

SERVE_INSTALL_HINT = 'pip install "tphyolo[serve]"'
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
IMAGES_WINDOW_S = 10.0


class ServiceMetrics:
    """The metrics above; `queue_depth` and `restarts` are read when scraped."""

    def __init__(self, *, queue_depth: Callable[[], int], restarts: Callable[[], int]) -> None:
        prometheus = require("prometheus_client", purpose="tphyolo serve", install=SERVE_INSTALL_HINT)
        self._prometheus = prometheus
        self.registry = prometheus.CollectorRegistry()
        kw = {"registry": self.registry}
        self.requests = prometheus.Counter("tphyolo_requests", "requests answered, by status", ["status"], **kw)
        self.request_seconds = prometheus.Histogram(
            "tphyolo_request_seconds", "request latency, arrival to answer", buckets=LATENCY_BUCKETS_S, **kw
        )
        self.queue_seconds = prometheus.Histogram(
            "tphyolo_queue_seconds", "seconds an image waited for its batch", buckets=LATENCY_BUCKETS_S, **kw
        )
        self.inference_seconds = prometheus.Histogram(
            "tphyolo_inference_seconds", "seconds a batch spent in the worker", buckets=LATENCY_BUCKETS_S, **kw
        )
        self.batch_size = prometheus.Histogram(
            "tphyolo_batch_size", "images per forward pass", buckets=BATCH_BUCKETS, **kw
        )
        self.images = prometheus.Counter("tphyolo_images", "images detected", **kw)
        images_per_second = prometheus.Gauge(
            "tphyolo_images_per_second", f"images detected per second over the last {IMAGES_WINDOW_S:g} s", **kw
        )
        images_per_second.set_function(self._images_per_second)
        prometheus.Gauge("tphyolo_queue_depth", "images waiting", **kw).set_function(queue_depth)
        self.registry.register(_RestartCounter(restarts))
        self._recent: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def observe_request(self, status: int, seconds: float) -> None:
        self.requests.labels(status=str(status)).inc()
        self.request_seconds.observe(seconds)

    def observe_batch(self, size: int, seconds: float) -> None:
        self.batch_size.observe(size)
        self.inference_seconds.observe(seconds)
        self.images.inc(size)
        with self._lock:
            self._recent.append((time.monotonic(), size))

    def _images_per_second(self) -> float:
        with self._lock:
            horizon = time.monotonic() - IMAGES_WINDOW_S
            while self._recent and self._recent[0][0] < horizon:
                self._recent.popleft()
            return sum(size for _, size in self._recent) / IMAGES_WINDOW_S

    def text(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return self._prometheus.generate_latest(self.registry), self._prometheus.CONTENT_TYPE_LATEST


class _RestartCounter:
    """`tphyolo_worker_restarts_total`, a counter read from the worker's own count when scraped."""

    def __init__(self, restarts: Callable[[], int]) -> None:
        self.restarts = restarts

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        yield CounterMetricFamily("tphyolo_worker_restarts", "inference workers restarted", value=self.restarts())

"""Dynamic batching: images of many requests wait together, briefly, and go through the model in one pass.

    batcher = Batcher(worker, max_batch=8, max_wait_s=0.005, max_queue=64)
    batcher.start()
    futures = batcher.submit(images, settings, deadline=time.monotonic() + 30)  # one Future per image
    answer = futures[0].result()   # ImageAnswer: rows (n, 6), queue and inference seconds, batch size

An image waits in a bounded queue (`max_queue` images): a request that does not fit is refused at once (503
with Retry-After), never left to time out. One thread forms the batches: the oldest waiting image and those of
its bucket -- the same settings and the same letterboxed shape, which is what lets them share one forward pass
-- up to `max_batch`, waiting at most `max_wait_s` from the oldest's arrival for the batch to fill. While the
worker runs a batch the next one gathers, so under load batches fill without waiting. An image whose request
gave up (its deadline passed, its future cancelled) is dropped before it costs a pass.

A batch whose worker crashed is answered 503 and the worker restarted; the images waiting meanwhile stay queued
and are answered by the new worker. `stop()` refuses new images, answers every queued one, then stops the
worker: nothing accepted is lost.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tphyolo.serve.options import Settings
from tphyolo.serve.problems import RequestProblem, unavailable
from tphyolo.serve.worker import InferenceWorker, WorkerCrashed, WorkerFailed

LOGGER = logging.getLogger(__name__)
RESTART_PAUSE_S = 1.0  # between attempts to start a worker that failed to start


@dataclass(frozen=True)
class ImageAnswer:
    """One image's detections (n, 6) x1, y1, x2, y2, score, class in original pixels; seconds it waited in the
    queue and its batch spent in the worker; the size of its batch."""

    rows: np.ndarray
    queue_s: float
    inference_s: float
    batch_size: int


@dataclass(eq=False)
class _Job:
    image: np.ndarray
    settings: Settings
    bucket: tuple
    deadline: float
    enqueued: float = field(default_factory=time.monotonic)
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


def letterboxed_shape(height: int, width: int, *, imgsz: int, stride: int) -> tuple[int, int]:
    """(h, w) of the network input of a height x width image letterboxed to `imgsz` (rounded up to a `stride`
    multiple) with its short side padded to the next stride multiple, as `Predictor` letterboxes."""
    size = math.ceil(imgsz / stride) * stride
    r = size / max(height, width)
    h, w = max(1, round(height * r)), max(1, round(width * r))
    return h + (size - h) % stride, w + (size - w) % stride


class Batcher:
    """Batches images for `worker` (see the module docstring). `on_batch(size, seconds)` is called after each
    pass (metrics)."""

    def __init__(
        self,
        worker: InferenceWorker,
        *,
        max_batch: int,
        max_wait_s: float,
        max_queue: int,
        on_batch: Callable[[int, float], None] = lambda size, seconds: None,
    ) -> None:
        self.worker, self.max_batch, self.max_wait_s, self.max_queue = worker, max_batch, max_wait_s, max_queue
        self.on_batch = on_batch
        self._pending: deque[_Job] = deque()
        self._condition = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.ready = False
        self.in_flight = 0  # images of the batch in the worker now

    @property
    def depth(self) -> int:
        """Images waiting (not those of the batch in the worker)."""
        return len(self._pending)

    def start(self) -> None:
        """Start the worker (its model loaded and warm: then `ready`) and the batching thread."""
        self.worker.start()
        self.ready = True
        self._thread = threading.Thread(target=self._run, name="tphyolo-serve-batcher", daemon=True)
        self._thread.start()

    def submit(
        self, images: Sequence[np.ndarray], settings: Settings, *, deadline: float
    ) -> list[concurrent.futures.Future]:
        """Queue `images` (all or none) with their `settings`; one Future per image, giving its ImageAnswer or
        raising RequestProblem (503 when its worker crashed, 500 when the worker refused the batch, 504 past
        `deadline`). Raises a 503 RequestProblem at once when they do not fit or the service is stopping."""
        info = self.worker.info
        stride = info.stride if info is not None else 32
        jobs = []
        for image in images:
            shape = (
                None
                if settings.slicing
                else letterboxed_shape(*image.shape[:2], imgsz=settings.config.imgsz, stride=stride)
            )
            jobs.append(_Job(image, settings, (settings, shape), deadline))
        with self._condition:
            if self._stopping:
                raise unavailable("the service is shutting down")
            if len(self._pending) + len(jobs) > self.max_queue:
                raise unavailable(f"the queue is full ({len(self._pending)} of {self.max_queue} images waiting)")
            self._pending.extend(jobs)
            self._condition.notify()
        return [job.future for job in jobs]

    def stop(self, timeout: float | None = None) -> None:
        """Refuse new images, answer the queued ones (within `timeout` seconds), stop the worker."""
        with self._condition:
            self._stopping = True
            self._condition.notify()
        if self._thread is not None:
            self._thread.join(timeout)
        self.ready = False
        self.worker.stop()

    def _next_batch(self) -> list[_Job] | None:
        """The next batch (see the module docstring), or None when stopping with nothing queued."""
        with self._condition:
            while not self._pending and not self._stopping:
                self._condition.wait()
            if not self._pending:
                return None
            first = self._pending[0]
            while True:
                batch = [job for job in self._pending if job.bucket == first.bucket][: self.max_batch]
                left = first.enqueued + self.max_wait_s - time.monotonic()
                if len(batch) >= self.max_batch or left <= 0 or self._stopping:
                    break
                self._condition.wait(left)
            for job in batch:
                self._pending.remove(job)
            return batch

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            now = time.monotonic()
            live = []
            for job in batch:
                if not job.future.set_running_or_notify_cancel():
                    continue  # the request gave up
                if now > job.deadline:
                    job.future.set_exception(RequestProblem(504, "the request's deadline passed while it waited"))
                else:
                    live.append(job)
            if live:
                self._answer(live, now)

    def _answer(self, jobs: list[_Job], started: float) -> None:
        self.in_flight = len(jobs)
        try:
            rows, seconds = self.worker.detect([job.image for job in jobs], jobs[0].settings)
        except WorkerCrashed as error:
            LOGGER.error("%s; %d image(s) answered 503", error, len(jobs))
            for job in jobs:
                job.future.set_exception(unavailable(f"{error}; it is being restarted"))
            self._restart_worker()
            return
        except WorkerFailed as error:
            for job in jobs:
                job.future.set_exception(RequestProblem(500, f"inference failed: {error}"))
            return
        finally:
            self.in_flight = 0
        self.on_batch(len(jobs), seconds)
        for job, image_rows in zip(jobs, rows, strict=True):
            job.future.set_result(ImageAnswer(image_rows, started - job.enqueued, seconds, len(jobs)))

    def _restart_worker(self) -> None:
        """Start a new worker, again and again until one starts or the service stops; not `ready` meanwhile."""
        self.ready = False
        while not self._stopping:
            try:
                self.worker.restart()
            except RuntimeError as error:
                LOGGER.error("%s; trying again in %.0f s", error, RESTART_PAUSE_S)
                time.sleep(RESTART_PAUSE_S)
            else:
                self.ready = True
                return

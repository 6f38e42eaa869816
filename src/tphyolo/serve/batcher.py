"""Dynamic batching: images of many requests wait together, briefly, and go through the model in one pass.

    batcher = Batcher(worker, max_batch=8, max_wait_s=0.005, max_queue=64)
    batcher.start()
    futures = batcher.submit(images, settings, deadline=time.monotonic() + 30)  # one Future per image
    answer = futures[0].result()   # ImageAnswer: rows (n, 6), queue and inference seconds, batch size

An image waits in a bounded queue (`max_queue` images): a request that does not fit is refused at once (503
with Retry-After; 413 when it holds more images than the whole queue, which no retry can change), never left
to time out. One thread forms the batches: the oldest waiting image and those of
its bucket -- the same settings and the same letterboxed shape, which is what lets them share one forward pass
-- up to `max_batch`, waiting at most `max_wait_s` from the oldest's arrival for the batch to fill. While the
worker runs a batch the next one gathers, so under load batches fill without waiting. An image whose future is
cancelled (its client left, its request timed out) leaves the queue at once, and its pixels with it; one whose
deadline passed is dropped before it costs a pass.

A batch whose worker crashed is answered 503 and the worker restarted; the images waiting meanwhile stay queued
and are answered by the new worker. A batch still running (or not yet taken: a stopped worker whose pipe is
full) when the last deadline of its requests passes is work nobody waits for: the worker is ended (504) and
restarted; while a batch runs past its deadline (an in-process worker, which cannot be ended) `stuck` says so
and the service is not ready. Any other error in a batch -- the worker's, the metrics callback's, a restart
that raises -- answers every request of that batch (500, one log line) and the thread goes on. `stop()`
refuses new images, answers every queued one, then stops the worker: nothing accepted is lost.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tphyolo.errors import describe_error
from tphyolo.serve.options import Settings
from tphyolo.serve.problems import RequestProblem, unavailable
from tphyolo.serve.worker import InferenceWorker, WorkerCrashed, WorkerFailed, WorkerTimedOut

LOGGER = logging.getLogger(__name__)
RESTART_PAUSE_S = 1.0  # between attempts to start a worker that failed to start
STOP_ANSWER_S = 2.0  # for the thread to answer what is left once the worker is stopped


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
        self._stop_lock = threading.Lock()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._ready = False
        self.in_flight = 0  # images of the batch in the worker now
        self._batch_deadline: float | None = None  # the last deadline of the batch in the worker

    @property
    def ready(self) -> bool:
        """The worker is started, the batching thread runs and no batch is past its deadline."""
        return self._ready and self._thread is not None and self._thread.is_alive() and not self.stuck

    @property
    def stuck(self) -> bool:
        """A batch is in the worker past the last deadline of its requests."""
        deadline = self._batch_deadline
        return deadline is not None and time.monotonic() > deadline

    @property
    def depth(self) -> int:
        """Images waiting (not those of the batch in the worker)."""
        return len(self._pending)

    def start(self) -> None:
        """Start the worker (its model loaded and warm: then `ready`) and the batching thread."""
        self.worker.start()
        self._ready = True
        self._thread = threading.Thread(target=self._run, name="tphyolo-serve-batcher", daemon=True)
        self._thread.start()

    def submit(
        self, images: Sequence[np.ndarray], settings: Settings, *, deadline: float
    ) -> list[concurrent.futures.Future]:
        """Queue `images` (all or none) with their `settings`; one Future per image, giving its ImageAnswer or
        raising RequestProblem (503 when its worker crashed, 500 when the worker refused the batch, 504 past
        `deadline`). Raises a 503 RequestProblem at once when they do not fit or the service is stopping."""
        if len(images) > self.max_queue:
            raise RequestProblem(413, too_many_images(len(images), self.max_queue))
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
        for job in jobs:
            job.future.add_done_callback(functools.partial(self._forget, job))
        return [job.future for job in jobs]

    def _forget(self, job: _Job, future: concurrent.futures.Future) -> None:
        """Take `job` out of the queue once its future is cancelled: nobody waits for it, its image is let go."""
        if future.cancelled():
            with self._condition, contextlib.suppress(ValueError):  # not queued: in a batch already
                self._pending.remove(job)

    def stop(self, timeout: float | None = None) -> None:
        """Refuse new images, answer the queued ones within `timeout` seconds, then stop the worker (killing it
        when it is busy still: what is left is answered 503)."""
        with self._condition:
            self._stopping = True
            self._condition.notify()
        if self._thread is not None:
            self._thread.join(timeout)
        self._ready = False
        with self._stop_lock:  # once at a time: a shutdown's timer and the app's stop may overlap
            self.worker.stop(timeout=0 if self._thread is not None and self._thread.is_alive() else 5.0)
        if self._thread is not None:
            self._thread.join(STOP_ANSWER_S)

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
            if not live:
                continue
            try:
                self._answer(live, now)
            except Exception as error:  # noqa: BLE001 - every caller of the batch answered, the thread goes on
                LOGGER.error("a batch of %d image(s) failed: %s", len(live), describe_error(error))
                _settle(live, RequestProblem(500, f"internal error: {describe_error(error)}"))

    def _answer(self, jobs: list[_Job], started: float) -> None:
        deadline = max(job.deadline for job in jobs)
        self.in_flight, self._batch_deadline = len(jobs), deadline
        try:
            rows, seconds = self.worker.detect(
                [job.image for job in jobs], jobs[0].settings, timeout=max(deadline - time.monotonic(), 0.0)
            )
        except WorkerTimedOut as error:
            LOGGER.error("%s; %d image(s) answered 504", error, len(jobs))
            _settle(jobs, RequestProblem(504, f"no answer within the deadline ({error})"))
            rows = None
        except WorkerCrashed as error:
            LOGGER.error("%s; %d image(s) answered 503", error, len(jobs))
            _settle(jobs, unavailable(f"{error}; it is being restarted"))
            rows = None
        except WorkerFailed as error:
            _settle(jobs, RequestProblem(500, f"inference failed: {error}"))
            return
        finally:
            self.in_flight, self._batch_deadline = 0, None
        if rows is None:  # the worker is gone
            self._restart_worker()
            return
        if len(rows) != len(jobs):
            raise RuntimeError(f"the worker answered {len(rows)} image(s) for a batch of {len(jobs)}")
        self.on_batch(len(jobs), seconds)
        for job, image_rows in zip(jobs, rows, strict=True):
            job.future.set_result(ImageAnswer(image_rows, started - job.enqueued, seconds, len(jobs)))

    def _restart_worker(self) -> None:
        """Start a new worker, again and again until one starts or the service stops; not `ready` meanwhile."""
        self._ready = False
        while not self._stopping:
            try:
                self.worker.restart()
            except Exception as error:  # noqa: BLE001 - a worker that cannot start now may start later
                LOGGER.error("%s; trying again in %.0f s", describe_error(error), RESTART_PAUSE_S)
                time.sleep(RESTART_PAUSE_S)
            else:
                self._ready = True
                return


def too_many_images(count: int, max_queue: int) -> str:
    """Why a request of `count` images can never be queued."""
    return f"the request holds {count} images; at most {max_queue} fit in the queue (--max-queue)"


def _settle(jobs: Sequence[_Job], problem: RequestProblem) -> None:
    """Answer `problem` to each job not answered yet."""
    for job in jobs:
        if not job.future.done():
            job.future.set_exception(problem)

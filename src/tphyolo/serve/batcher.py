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
deadline passed is dropped before it costs a pass. The worker runs as many batches at once as it has inference
streams (`ModelInfo.streams`, decided when it loads): that many threads form and send batches, each waiting for
its own answer, so that a stream finishing a batch finds the next one already gathered.

A batch whose worker crashed is answered 503 and the worker restarted; the images waiting meanwhile stay queued
and are answered by the new worker (one thread restarts it; the others wait for it before sending their next
batch, and do not restart it again for the batches it took down with it). A batch still running (or not yet taken:
a stopped worker whose pipe is full) when the last deadline of its requests passes is work nobody waits for: the
worker is ended (504) and restarted; while a batch runs past its deadline (an in-process worker, which cannot be
ended) `stuck` says so and the service is not ready. Any other error in a batch -- the worker's, the metrics
callback's, a restart that raises -- answers every request of that batch (500, one log line) and the thread goes
on. `stop()` refuses new images, answers every queued one, then stops the worker: nothing accepted is lost.
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

from tphyolo.data.letterbox import letterbox_shape
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
        self._threads: list[threading.Thread] = []
        self._ready = False
        self._restart_lock = threading.Lock()  # held while a worker restarts: the other threads wait for it
        self._generation = 0  # workers started since, which tells a thread whether its worker was restarted
        self._in_worker: dict[int, tuple[int, float]] = {}  # per thread: images of its batch in the worker, and
        # the last deadline of their requests

    @property
    def ready(self) -> bool:
        """The worker is started, the batching threads run and no batch is past its deadline."""
        alive = bool(self._threads) and all(thread.is_alive() for thread in self._threads)
        return self._ready and alive and not self.stuck

    @property
    def stuck(self) -> bool:
        """A batch is in the worker past the last deadline of its requests."""
        now = time.monotonic()
        return any(now > deadline for _, deadline in list(self._in_worker.values()))

    @property
    def in_flight(self) -> int:
        """Images of the batches in the worker now."""
        return sum(count for count, _ in list(self._in_worker.values()))

    @property
    def depth(self) -> int:
        """Images waiting (not those of the batch in the worker)."""
        return len(self._pending)

    def start(self) -> None:
        """Start the worker (its model loaded and warm: then `ready`) and a batching thread per inference stream
        of its model (`ModelInfo.streams`; one for a worker that does not say)."""
        info = self.worker.start()
        self._ready = True
        streams = getattr(info, "stream_count", 1)
        self._threads = [threading.Thread(target=self._run, name=f"tphyolo-serve-batcher-{i}", daemon=True)
                         for i in range(streams)]  # fmt: skip
        for thread in self._threads:
            thread.start()

    def submit(self, images: Sequence, settings: Settings, *, deadline: float) -> list[concurrent.futures.Future]:
        """Queue `images` (all or none; what the worker's `detect` takes, each with a `shape` whose first two
        items are its height and width: a `RequestImage`) with their `settings`; one Future per image, giving its
        ImageAnswer or raising RequestProblem (503 when its worker crashed, 500 when the worker refused the
        batch, 504 past `deadline`, the worker's own for an image it answered with one: 422 when its pixels do
        not decode). Raises a 503 RequestProblem at once when they do not fit or the service is stopping."""
        if len(images) > self.max_queue:
            raise RequestProblem(413, too_many_images(len(images), self.max_queue))
        info = self.worker.info
        stride = info.stride if info is not None else 32
        jobs = []
        for image in images:
            size = math.ceil(settings.config.imgsz / stride) * stride  # as check_imgsz rounds it
            shape = None if settings.slicing else letterbox_shape(*image.shape[:2], size, stride=stride, auto=True)[1]
            jobs.append(_Job(image, settings, (settings, shape), deadline))
        with self._condition:
            if self._stopping:
                raise unavailable("the service is shutting down")
            if len(self._pending) + len(jobs) > self.max_queue:
                raise unavailable(f"the queue is full ({len(self._pending)} of {self.max_queue} images waiting)")
            self._pending.extend(jobs)
            self._condition.notify_all()
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
            self._condition.notify_all()
        until = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if until is None else max(until - time.monotonic(), 0.0))
        self._ready = False
        busy = any(thread.is_alive() for thread in self._threads)
        with self._stop_lock:  # once at a time: a shutdown's timer and the app's stop may overlap
            self.worker.stop(timeout=0 if busy else 5.0)
        until = time.monotonic() + STOP_ANSWER_S
        for thread in self._threads:
            thread.join(max(until - time.monotonic(), 0.0))

    def _next_batch(self) -> list[_Job] | None:
        """The next batch (see the module docstring), or None when stopping with nothing queued."""
        with self._condition:
            while True:
                while not self._pending and not self._stopping:
                    self._condition.wait()
                if not self._pending:
                    return None
                first = self._pending[0]  # again after each wait: another thread may have taken it
                batch = [job for job in self._pending if job.bucket == first.bucket][: self.max_batch]
                left = first.enqueued + self.max_wait_s - time.monotonic()
                if len(batch) >= self.max_batch or left <= 0 or self._stopping:
                    break
                self._condition.wait(left)
            for job in batch:
                self._pending.remove(job)
            if self._pending:
                self._condition.notify()  # another thread, for what is left
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
        with self._restart_lock:  # a worker restarting is waited for; the batch goes to the one it starts
            generation = self._generation
        if time.monotonic() > deadline:
            _settle(jobs, RequestProblem(504, "the request's deadline passed while the worker restarted"))
            return
        me = threading.get_ident()
        self._in_worker[me] = (len(jobs), deadline)
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
            self._in_worker.pop(me, None)
        if rows is None:  # the worker is gone
            self._restart_worker(generation)
            return
        if len(rows) != len(jobs):
            raise RuntimeError(f"the worker answered {len(rows)} image(s) for a batch of {len(jobs)}")
        self.on_batch(len(jobs), seconds)
        for job, image_rows in zip(jobs, rows, strict=True):
            if isinstance(image_rows, RequestProblem):  # its pixels did not decode (the worker decodes them)
                job.future.set_exception(image_rows)
            else:
                job.future.set_result(ImageAnswer(image_rows, started - job.enqueued, seconds, len(jobs)))

    def _restart_worker(self, generation: int) -> None:
        """Start a new worker, again and again until one starts or the service stops; not `ready` meanwhile.
        Nothing when another thread restarted it since `generation` (the worker that took this batch down)."""
        with self._restart_lock:
            if generation != self._generation:
                return
            self._ready = False
            while not self._stopping:
                try:
                    self.worker.restart()
                except Exception as error:  # noqa: BLE001 - a worker that cannot start now may start later
                    LOGGER.error("%s; trying again in %.0f s", describe_error(error), RESTART_PAUSE_S)
                    time.sleep(RESTART_PAUSE_S)
                else:
                    self._ready = True
                    break
            self._generation += 1


def too_many_images(count: int, max_queue: int) -> str:
    """Why a request of `count` images can never be queued."""
    return f"the request holds {count} images; at most {max_queue} fit in the queue (--max-queue)"


def _settle(jobs: Sequence[_Job], problem: RequestProblem) -> None:
    """Answer `problem` to each job not answered yet."""
    for job in jobs:
        if not job.future.done():
            job.future.set_exception(problem)

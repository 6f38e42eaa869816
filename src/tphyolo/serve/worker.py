"""The inference worker: an `InferenceEngine` in a child process of its own, and its supervision.

    worker = InferenceWorker(spec, max_batch=8)
    info = worker.start()                   # spawns the process, loads and warms the model: ModelInfo
    rows, seconds = worker.detect(images, settings, timeout=30)  # WorkerCrashed when it died, WorkerTimedOut
    worker.restart(); worker.stop()

Why a process: a model that crashes (a native fault, an out-of-memory kill, a SIGKILL) takes only the worker
with it; the service sees the pipe close, answers the requests of its batches 503 and starts a new worker, which
loads the weights again (a file replaced meanwhile gives the new model, with its new hash). The child is spawned
(not forked: the parent runs threads), applies the runtime's process settings as any entry point does, and talks
over one pipe: batches of images and their settings in, each with an id, the rows of each image (or a one-line
error) out with the batch's id. One worker per device; it runs as many batches at once as its engine has
inference streams (`ModelInfo.streams`: OpenVINO's throughput path, `tphyolo.serve.engine`), each in a thread
of its own, so `detect` may be called from that many threads at once. A batch that outlives its `timeout`
(nobody waits for its answer any more) ends the process (SIGKILL): it cannot be interrupted otherwise, and it
would hold every later batch; the other batches in it then end as WorkerCrashed. The timeout bounds the whole
exchange, the write as well as the wait for the answer: a worker that stops reading (SIGSTOP, a hang) fills its
pipe, and a batch larger than the pipe holds would block its writer for ever. The parent closes its end of the
pipe to ask the worker to end, as writing to a stopped worker could block too. A call that finds the worker it
sent to gone ends that process only, never one started since by another thread's `restart`.

`stop()` may be called from another thread while `detect` waits (the service shutting down past its grace):
the waiting call then raises WorkerCrashed.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection

import numpy as np

from tphyolo.errors import describe_error
from tphyolo.infer.build import spec_runtime
from tphyolo.infer.spec import DetectorSpec
from tphyolo.runtime.config import configure_process
from tphyolo.serve.engine import InferenceEngine, ModelInfo, configure_worker_threads
from tphyolo.serve.options import Settings

LOGGER = logging.getLogger(__name__)
START_TIMEOUT_S = 600.0  # loading and warming a model (an ensemble of exported models on a busy machine)
_POLL_S = 0.05
KILL_WAIT_S = 5.0  # for a killed process to be reaped


class WorkerCrashed(RuntimeError):
    """The worker process ended without answering (killed, crashed, out of memory)."""


class WorkerTimedOut(WorkerCrashed):
    """The worker did not answer a batch within its timeout, and was ended."""


class WorkerFailed(RuntimeError):
    """The worker answered a batch with an error (one line), e.g. an exported model refusing the input."""


def _serve_batches(connection: Connection, spec: DetectorSpec, max_batch: int) -> None:
    """The child's main: load and warm the engine, say ready with its ModelInfo, then answer batches, each in one
    of `info.streams` threads, until the parent closes the pipe."""
    try:
        configure_process(spec_runtime(spec))  # this process's entry point: its settings, before CUDA starts
        configure_worker_threads(spec)
        engine = InferenceEngine(spec, max_batch=max_batch)
        engine.warm_up()
    except Exception as error:  # noqa: BLE001 - reported to the parent in one line, which refuses to start
        connection.send((None, "failed", describe_error(error)))
        return
    connection.send((None, "ready", engine.info))
    sending = threading.Lock()

    def answer(batch_id: int, images: list[np.ndarray], settings: Settings) -> None:
        start = time.perf_counter()
        try:
            message = (batch_id, "ok", engine.detect(images, settings), time.perf_counter() - start)
        except Exception as error:  # noqa: BLE001 - one line to the parent, which answers the requests with it
            message = (batch_id, "error", describe_error(error))
        with sending, contextlib.suppress(OSError, ValueError):  # the parent is gone: nobody to answer
            connection.send(message)

    streams = concurrent.futures.ThreadPoolExecutor(engine.info.stream_count, thread_name_prefix="tphyolo-stream")
    with streams, contextlib.suppress(EOFError, OSError):  # the parent closed the pipe: its sign to end
        while True:
            streams.submit(answer, *connection.recv())


class InferenceWorker:
    """An InferenceEngine of `spec` in a child process (see the module docstring); `max_batch` images per pass.
    `start`, `restart` and `stop` are called from one thread at a time; `detect` from up to `info.streams`
    threads at once."""

    def __init__(self, spec: DetectorSpec, *, max_batch: int) -> None:
        self.spec, self.max_batch = spec, max_batch
        self._context = multiprocessing.get_context("spawn")
        self._process = None
        self._connection: Connection | None = None
        self.info: ModelInfo | None = None
        self.restarts = 0
        self._ids = itertools.count()
        self._sending = threading.Lock()  # one message on the pipe at a time
        self._answers: dict = {}  # batch id -> its message, read from the pipe by whichever waiter reads it
        self._answered = threading.Condition()  # over `_answers` and `_reading`
        self._reading = False  # a waiter reads the pipe (the others wait for it to hand their answers over)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> ModelInfo:
        """Spawn the process and wait until its model is loaded and warm. Raises RuntimeError with the child's
        one-line reason when it cannot load (or does not answer within START_TIMEOUT_S)."""
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_serve_batches, args=(child, self.spec, self.max_batch), name="tphyolo-serve-worker", daemon=True
        )
        process.start()
        child.close()
        with self._answered:
            self._answers.clear()
        self._process, self._connection = process, parent
        message = self._receive(None, timeout=START_TIMEOUT_S)
        if message[1] != "ready":
            self.stop()
            raise RuntimeError(f"the inference worker did not start: {message[2]}")
        self.info = message[2]
        return self.info

    def detect(
        self, images: Sequence[np.ndarray], settings: Settings, *, timeout: float | None = None
    ) -> tuple[list[np.ndarray], float]:
        """The rows of each image and the seconds the worker spent. Raises WorkerCrashed when the process ended
        (it is then stopped: `restart` it), WorkerTimedOut when it gave no answer within `timeout` seconds
        (None: no limit; it is then ended), WorkerFailed when it answered with an error."""
        deadline = None if timeout is None else time.monotonic() + timeout
        batch_id = next(self._ids)
        message = pickle.dumps((batch_id, list(images), settings), protocol=pickle.HIGHEST_PROTOCOL)
        self._send(message, timeout=timeout)
        answer = self._receive(batch_id, timeout=None if deadline is None else max(deadline - time.monotonic(), 0.0))
        if answer[1] == "error":
            raise WorkerFailed(answer[2])
        return answer[2], answer[3]

    def _send(self, data: bytes, *, timeout: float | None) -> None:
        """Write `data` (a pickled message) to the worker within `timeout` seconds (None: no limit), waiting for
        the writes of other threads first. A worker that stops reading (stopped, hung) fills its pipe, and a
        write then blocks: it is done by a thread of its own, and the worker that has not taken it all by the
        timeout is killed, which breaks the pipe and ends the write. Raises WorkerTimedOut then, WorkerCrashed
        when the pipe is broken (the worker is stopped in both cases)."""
        connection, process = self._connection, self._process
        if connection is None or process is None:
            raise WorkerCrashed("the inference worker is not running")
        failures: list[BaseException] = []

        def write() -> None:
            try:
                with self._sending:
                    connection.send_bytes(data)
            except (OSError, EOFError, ValueError, TypeError) as error:  # broken, or closed by stop() meanwhile
                failures.append(error)

        writer = threading.Thread(target=write, name="tphyolo-serve-send", daemon=True)
        writer.start()
        writer.join(timeout)
        if writer.is_alive():
            process.kill()
            writer.join(KILL_WAIT_S)
            self._end(process, timeout=0)
            raise WorkerTimedOut(f"the inference worker did not take a batch within {timeout:.1f} s and was ended")
        if failures:
            self._end(process)
            raise WorkerCrashed(f"the inference worker is gone ({failures[0]})")

    def _receive(self, batch_id: int | None, *, timeout: float | None):
        """The worker's message for `batch_id` (None: its start), waiting while the process lives (and at most
        `timeout` seconds). One waiter at a time reads the pipe and hands the others their answers."""
        deadline = None if timeout is None else time.monotonic() + timeout
        connection, process = self._connection, self._process  # stop() from another thread clears them
        if connection is None or process is None:
            raise WorkerCrashed("the inference worker is not running")
        while True:
            with self._answered:
                if batch_id in self._answers:
                    return self._answers.pop(batch_id)
                reader = not self._reading
                if reader:
                    self._reading = True
                else:
                    self._answered.wait(_POLL_S)
            try:
                if reader and connection.poll(_POLL_S):
                    message = connection.recv()
                    with self._answered:
                        self._answers[message[0]] = message
                    continue
                alive = process.is_alive()
            except (EOFError, OSError, ValueError):  # the pipe closed (the process ended, or stop() closed it)
                alive = False
            finally:
                if reader:
                    with self._answered:
                        self._reading = False
                        self._answered.notify_all()
            if alive and (deadline is None or time.monotonic() < deadline):
                continue
            if alive:
                self._end(process, timeout=0)
                raise WorkerTimedOut(f"the inference worker did not answer within {timeout:.1f} s and was ended")
            process.join(1.0)  # reaped, so that its exit code is known
            code = process.exitcode
            self._end(process)
            raise WorkerCrashed(
                f"the inference worker {'was stopped' if code is None else f'ended with exit code {code}'}"
            )

    def _end(self, process, *, timeout: float = 5.0) -> None:  # noqa: ANN001 - a multiprocessing Process
        """Stop the worker when it is still `process`; else (another thread restarted it meanwhile) end only
        `process`."""
        if self._process is process:
            self.stop(timeout=timeout)
        elif process.is_alive():
            process.kill()
            process.join(KILL_WAIT_S)

    def restart(self) -> ModelInfo:
        """Stop what is left of the worker and start a new one (the weights loaded again)."""
        self.stop()
        self.restarts += 1
        LOGGER.warning("restarting the inference worker (restart %d)", self.restarts)
        return self.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to end (its pipe closed: nothing is written, which could block), give it `timeout`
        seconds, then kill it."""
        process, connection = self._process, self._connection
        self._process, self._connection = None, None
        if connection is not None:
            connection.close()
        if process is not None:
            process.join(timeout)
            if process.is_alive():
                process.kill()
                process.join(KILL_WAIT_S)


class InProcessWorker:
    """InferenceWorker's interface over an engine in this process: for a process that is itself supervised
    (a Ray Serve replica, which Ray restarts when it dies or reports itself unhealthy). It has no `restart`:
    it never raises WorkerCrashed while running, and a batch past its timeout cannot be interrupted; the
    service reports itself not ready (and the replica unhealthy) instead."""

    def __init__(self, spec: DetectorSpec, *, max_batch: int) -> None:
        self.spec, self.max_batch = spec, max_batch
        self.engine = None
        self.info: ModelInfo | None = None
        self.restarts = 0

    @property
    def pid(self) -> int:
        return os.getpid()

    def start(self) -> ModelInfo:
        try:
            engine = InferenceEngine(self.spec, max_batch=self.max_batch)
            engine.warm_up()
        except Exception as error:  # noqa: BLE001 - as the child process reports it: one line, no start
            raise RuntimeError(f"the inference worker did not start: {describe_error(error)}") from None
        self.engine, self.info = engine, engine.info
        return engine.info

    def detect(
        self, images: Sequence[np.ndarray], settings: Settings, *, timeout: float | None = None
    ) -> tuple[list[np.ndarray], float]:
        """As InferenceWorker.detect; `timeout` is not enforced (see the class docstring)."""
        if self.engine is None:
            raise WorkerCrashed("the inference worker is not running")
        start = time.perf_counter()
        try:
            rows = self.engine.detect(images, settings)
        except Exception as error:  # noqa: BLE001 - one line for the requests of the batch
            raise WorkerFailed(describe_error(error)) from None
        return rows, time.perf_counter() - start

    def stop(self, timeout: float = 5.0) -> None:
        if self.engine is not None:
            self.engine.close()
        self.engine = None

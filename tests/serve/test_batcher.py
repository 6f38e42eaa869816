"""The batching thread under failures injected by a scripted worker: every exception in a batch answers every
caller of that batch and the thread goes on; a batch past its deadline is answered 504 and its worker
restarted; a request of more images than the queue is 413. Bounded in time: every wait has a timeout."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.serve.app import Service
from tphyolo.serve.batcher import Batcher
from tphyolo.serve.config import ServeConfig
from tphyolo.serve.options import Settings
from tphyolo.serve.problems import RequestProblem
from tphyolo.serve.worker import WorkerTimedOut

SETTINGS = Settings(InferenceConfig(imgsz=64))
IMAGE = np.zeros((32, 32, 3), np.uint8)
WAIT_S = 10.0


class ScriptedWorker:
    """InferenceWorker's interface; `detect` and `restart` do what `script` and `restart_errors` say, in turn."""

    def __init__(self, script, *, restart_errors=(), start_error=None) -> None:
        self.script, self.restart_errors, self.start_error = list(script), list(restart_errors), start_error
        self.info, self.restarts, self.pid, self.timeouts = None, 0, 1, []

    def start(self):
        if self.start_error is not None:
            raise self.start_error
        self.info = SimpleNamespace(stride=32, name="scripted")
        return self.info

    def detect(self, images, settings, *, timeout=None):
        self.timeouts.append(timeout)
        step = self.script.pop(0) if self.script else "ok"
        if isinstance(step, BaseException):
            raise step
        count = len(images) - 1 if step == "one short" else len(images)
        return [np.full((1, 6), i, np.float32) for i in range(count)], 0.01

    def restart(self):
        if self.restart_errors:
            raise self.restart_errors.pop(0)
        self.restarts += 1

    def stop(self, timeout=5.0):
        pass


def answer(batcher: Batcher, *, deadline_s: float = WAIT_S):
    future = batcher.submit([IMAGE], SETTINGS, deadline=time.monotonic() + deadline_s)[0]
    try:
        return future.result(timeout=WAIT_S)
    except RequestProblem as problem:
        return problem


@pytest.fixture
def batcher_of():
    made = []

    def make(worker, **kw) -> Batcher:
        batcher = Batcher(worker, max_batch=1, max_wait_s=0.0, max_queue=4, **kw)
        batcher.start()
        made.append(batcher)
        return batcher

    yield make
    for batcher in made:
        batcher.stop(timeout=WAIT_S)


def test_a_worker_answering_too_few_images_answers_500_and_the_thread_goes_on(batcher_of):
    batcher = batcher_of(ScriptedWorker(["one short"]))
    failed = answer(batcher)
    assert failed.status == 500 and "answered 0 image(s) for a batch of 1" in failed.message
    assert batcher.ready
    assert answer(batcher).rows.tolist() == [[0.0] * 6]


def test_a_raising_metrics_callback_answers_500_and_the_thread_goes_on(batcher_of):
    calls = []

    def on_batch(size, seconds):
        calls.append(size)
        if len(calls) == 1:
            raise ZeroDivisionError("division by zero")

    batcher = batcher_of(ScriptedWorker([]), on_batch=on_batch)
    failed = answer(batcher)
    assert failed.status == 500 and failed.message == "internal error: division by zero"
    assert batcher.ready and answer(batcher).batch_size == 1 and calls == [1, 1]


def test_an_unexpected_worker_error_answers_500(batcher_of):
    batcher = batcher_of(ScriptedWorker([KeyError("boom")]))
    assert answer(batcher).status == 500
    assert batcher.ready and answer(batcher).rows.shape == (1, 6)


def test_a_restart_that_raises_oserror_is_tried_again(batcher_of):
    worker = ScriptedWorker([WorkerTimedOut("did not answer")], restart_errors=[OSError(24, "Too many open files")])
    batcher = batcher_of(worker)
    timed_out = answer(batcher, deadline_s=5.0)
    assert timed_out.status == 504 and "did not answer" in timed_out.message
    assert answer(batcher).rows.shape == (1, 6)  # queued meanwhile, answered by the restarted worker
    assert worker.restarts == 1 and batcher.ready
    assert 0 < worker.timeouts[0] <= 5.0  # the worker is given the batch's deadline


def test_a_request_of_more_images_than_the_queue_is_413(batcher_of):
    batcher = batcher_of(ScriptedWorker([]))
    with pytest.raises(RequestProblem) as caught:
        batcher.submit([IMAGE] * 5, SETTINGS, deadline=time.monotonic() + WAIT_S)
    assert caught.value.status == 413 and "5 images" in caught.value.message and "--max-queue" in caught.value.message


def test_a_model_that_fails_to_load_with_any_error_is_the_service_failure():
    worker = ScriptedWorker([], start_error=MemoryError("cannot allocate 40 GB"))
    service = Service(DetectorSpec(("m.pt",), device="cpu"), ServeConfig(), worker=worker)
    service.start()
    deadline = time.monotonic() + WAIT_S
    while service.failure is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert service.failure == "cannot allocate 40 GB"
    with pytest.raises(RequestProblem, match="did not load: cannot allocate 40 GB"):
        service.check_ready()
    service.stop()

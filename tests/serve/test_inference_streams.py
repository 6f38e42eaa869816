"""Inference streams and the batching decision: an OpenVINO model runs on OpenVINO's async infer queue with its
own number of requests, decided once at start-up and said (in /v1/models and the ready line); on a CPU images run
one per forward by rule (or as --max-batch says); several batches are in the worker at once, each answered with
its own rows, equal to the in-process Predictor's, and a worker they all lose is restarted once.
Bounded in time: every wait has a timeout."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tests.serve.conftest import SETTINGS

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.predict.predictor import Predictor
from tphyolo.serve.batcher import Batcher
from tphyolo.serve.config import CPU_MAX_BATCH, GPU_MAX_BATCH, ServeConfig
from tphyolo.serve.engine import inference_streams
from tphyolo.serve.options import Settings
from tphyolo.serve.worker import InferenceWorker, WorkerCrashed

WAIT_S = 20.0
FAKE = Settings(InferenceConfig(imgsz=64))
IMAGE = np.zeros((32, 32, 3), np.uint8)


def test_batching_is_a_flag_or_the_rule_never_a_timing():
    """Old behaviour: 8 images per pass on a CPU, where the forward gains too little per image to pay for the
    wait."""
    assert ServeConfig().batching("cpu") == (CPU_MAX_BATCH, "rule", ServeConfig().batching("cpu")[2])
    assert CPU_MAX_BATCH == 1 and "streams" in ServeConfig().batching("cpu")[2]
    assert ServeConfig().batching("cuda")[:2] == (GPU_MAX_BATCH, "rule")
    assert ServeConfig(max_batch=4).batching("cpu") == (4, "flag", "--max-batch 4")


class _Streams:
    has_streams, format, alone_on_latency = True, "openvino", True

    def __init__(self, count: int) -> None:
        self.count, self.calls = count, 0

    def use_streams(self, alone_when=lambda: True) -> int:
        self.calls += 1
        return self.count


def test_streams_are_openvino_s_own_and_one_for_other_runtimes():
    """Every model on OpenVINO: the fewest requests any has; a compiled checkpoint is asked through its compiled
    model; any other runtime in the ensemble: one forward at a time, and nothing is switched."""
    first, second = _Streams(4), _Streams(2)
    decided = inference_streams([first, second])
    assert (decided.value, decided.source) == ("2", "rule") and "THROUGHPUT" in decided.why
    assert first.calls == second.calls == 1
    idle = _Streams(4)
    mixed = inference_streams([idle, SimpleNamespace(has_streams=False, format="onnx")])
    assert mixed.value == "1" and "one forward at a time" in mixed.why and idle.calls == 0


def test_a_compiled_checkpoint_switches_its_compiled_model(tiny_weights):
    from tphyolo.infer.backends.compiled import load_compiled

    checkpoint = load_compiled(tiny_weights)
    assert checkpoint.has_streams and checkpoint.format == "openvino"
    decided = inference_streams([checkpoint])
    assert decided.value == str(len(checkpoint.compiled.queue))
    assert checkpoint.alone_on_latency == checkpoint.compiled.alone_on_latency


def test_the_async_queue_answers_each_thread_as_the_latency_request_does(tiny_weights):
    """OpenVINO's throughput path gives the outputs its latency path gives, to threads running at once. Old
    behaviour: one infer request, which two threads could not share; then two threads handed one idle request
    at once: "Infer Request is busy", or a caller never answered."""
    from tphyolo.infer.backends.compiled import load_compiled

    backend = load_compiled(tiny_weights).compiled
    inputs = [torch.rand(1, 3, 64 + 32 * (i % 2), 64, generator=torch.Generator().manual_seed(i)) for i in range(32)]
    expected = [backend.run(x) for x in inputs]
    streams = backend.use_streams()
    assert streams >= 1 and backend.use_streams() == streams  # decided once: no second compile
    outputs: dict[int, torch.Tensor | BaseException] = {}

    def run(index: int) -> None:
        try:
            outputs[index] = backend.run(inputs[index])
        except BaseException as error:  # noqa: BLE001 - reported below
            outputs[index] = error

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(inputs))]
    deadline = time.monotonic() + WAIT_S * 3
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a caller never got its output back"
    outputs = [outputs[i] for i in range(len(inputs))]
    for output, reference in zip(outputs, expected, strict=True):  # the throughput compile may split the work
        assert torch.allclose(output, reference, rtol=1e-5, atol=1e-5)  # otherwise: fp32 sums in another order


def _instrumented(backend, held: threading.Event | None = None) -> list[tuple[str, int]]:
    """Wrap `backend`'s two paths: each forward records (path, forwards running when it started); a forward on
    the LATENCY path waits for `held` (when given) before it runs."""
    log: list[tuple[str, int]] = []
    running = [0]
    lock = threading.Lock()

    def wrapped(name, run):
        def forward(x):
            with lock:
                running[0] += 1
                log.append((name, running[0]))
            try:
                if name == "latency" and held is not None:
                    assert held.wait(WAIT_S)
                return run(x)
            finally:
                with lock:
                    running[0] -= 1

        return forward

    backend._on_latency = wrapped("latency", backend._on_latency)
    backend._on_queue = wrapped("queue", backend._on_queue)
    return log


def test_a_forward_alone_runs_on_every_thread_and_never_beside_another(tiny_weights):
    """With streams made: a forward that finds no other running takes the LATENCY compilation (every thread),
    one arriving meanwhile waits for it to end, and its answers are the streams' bit for bit where the two
    compilations agree. Old behaviour: every forward on a stream's share of the threads (1 of the 2 cores of a
    2-core machine), so that one caller waited for a forward twice as long as `tphyolo predict`."""
    from tphyolo.infer.backends.compiled import load_compiled

    backend = load_compiled(tiny_weights).compiled
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    backend.use_streams()
    backend.alone_on_latency = True  # what the check at use_streams found here or not: the gate is tested alone
    held = threading.Event()
    log = _instrumented(backend, held)
    outputs = {}
    first = threading.Thread(target=lambda: outputs.setdefault("first", backend.run(x)), daemon=True)
    first.start()
    _wait_for(lambda: log == [("latency", 1)])
    second = threading.Thread(target=lambda: outputs.setdefault("second", backend.run(x)), daemon=True)
    second.start()
    time.sleep(0.2)  # a gate that let it through would have started it by now
    assert log == [("latency", 1)], "a forward ran beside the one alone on every thread"
    held.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert [path for path, _ in log] == ["latency", "latency"] and all(n == 1 for _, n in log)
    assert torch.equal(outputs["first"], outputs["second"])


def test_a_lone_forward_keeps_its_stream_while_other_work_is_coming(tiny_weights):
    """The caller's `alone_when` (the service: its worker holds one batch) decides too: while it says other
    batches are in the worker, a forward that finds none running takes a stream, so that the next batch's
    forward runs beside it instead of waiting. Old behaviour: every gap between forwards (both streams decoding
    their next images) sent the next forward down the LATENCY path, and 16 callers got 24.4 images/s against
    30.5 on the streams alone (2-core Xeon, README model at 640)."""
    from tphyolo.infer.backends.compiled import load_compiled

    checkpoint = load_compiled(tiny_weights)
    busy = [True]
    checkpoint.use_streams(lambda: not busy[0])
    backend = checkpoint.compiled
    backend.alone_on_latency = True  # the gate is tested alone (module docstring of the backend)
    log = _instrumented(backend)
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    backend.run(x)
    busy[0] = False
    backend.run(x)
    assert log == [("queue", 1), ("latency", 1)]


def test_forwards_run_on_the_streams_when_the_two_compilations_disagree(tiny_weights):
    """Where the THROUGHPUT compilation's answer differs in the last bit from the LATENCY one's (checked once, at
    `use_streams`), no forward runs on the latency path: an answer never depends on how busy the service was."""
    from tphyolo.infer.backends.compiled import load_compiled

    backend = load_compiled(tiny_weights).compiled
    on_queue = backend._on_queue
    backend._on_queue = lambda x: on_queue(x) + 1e-6  # a compilation that sums in another order
    backend.use_streams()
    assert backend.alone_on_latency is False and backend.request is None
    backend._on_queue = on_queue
    log = _instrumented(backend)
    backend.run(torch.rand(1, 3, 64, 64))
    assert log == [("queue", 1)]
    why = inference_streams([backend]).why
    assert "alone on a stream" in why


class _GatedWorker:
    """InferenceWorker's interface with `streams` streams; `detect` blocks until `release` is set, recording
    how many batches were in it at once; `crash` makes each raise WorkerCrashed once released."""

    def __init__(self, streams: int, *, crash: bool = False) -> None:
        self.streams, self.crash = streams, crash
        self.info, self.restarts, self.pid = None, 0, 1
        self.release, self.lock = threading.Event(), threading.Lock()
        self.inside = self.most_inside = 0

    def start(self):
        self.info = SimpleNamespace(stride=32, name="gated", stream_count=self.streams)
        return self.info

    def detect(self, images, settings, *, timeout=None):
        with self.lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            crash = self.crash  # the worker this batch went to
        try:
            assert self.release.wait(WAIT_S)
            if crash:
                raise WorkerCrashed("the inference worker ended with exit code -9")
            return [np.zeros((0, 6), np.float32) for _ in images], 0.01
        finally:
            with self.lock:
                self.inside -= 1

    def restart(self):
        self.restarts += 1
        self.crash = False

    def stop(self, timeout=5.0):
        pass


def _wait_for(condition) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


@pytest.mark.parametrize("streams", [1, 2])
def test_the_batcher_keeps_one_batch_per_stream_in_the_worker(streams):
    """Old behaviour: one batch in the worker at a time, whatever the model could run at once."""
    worker = _GatedWorker(streams)
    batcher = Batcher(worker, max_batch=1, max_wait_s=0.0, max_queue=8)
    batcher.start()
    try:
        futures = batcher.submit([IMAGE] * 4, FAKE, deadline=time.monotonic() + WAIT_S)
        _wait_for(lambda: worker.inside == streams and batcher.in_flight == streams)
        assert batcher.depth == 4 - streams
        worker.release.set()
        assert all(f.result(timeout=WAIT_S).batch_size == 1 for f in futures)
        assert worker.most_inside == streams
    finally:
        worker.release.set()
        batcher.stop(timeout=WAIT_S)


def test_a_worker_lost_by_two_batches_at_once_is_restarted_once():
    """Both streams' batches end with the worker: each answered 503, one restart. Old behaviour (one thread per
    batch restarting on its own): a second restart that would end the worker the first had just started."""
    worker = _GatedWorker(2, crash=True)
    batcher = Batcher(worker, max_batch=1, max_wait_s=0.0, max_queue=8)
    batcher.start()
    try:
        futures = batcher.submit([IMAGE] * 2, FAKE, deadline=time.monotonic() + WAIT_S)
        _wait_for(lambda: worker.inside == 2)
        worker.release.set()
        statuses = []
        for future in futures:
            with pytest.raises(Exception) as raised:
                future.result(timeout=WAIT_S)
            statuses.append(raised.value.status)
        assert statuses == [503, 503]
        _wait_for(lambda: batcher.ready)
        assert worker.restarts == 1
        assert batcher.submit([IMAGE], FAKE, deadline=time.monotonic() + WAIT_S)[0].result(timeout=WAIT_S)
    finally:
        worker.release.set()
        batcher.stop(timeout=WAIT_S)


@pytest.mark.slow
def test_the_worker_answers_threads_at_once_each_its_own_rows(tiny_weights, image_files):
    """Four threads send batches to one worker process at once: each gets its image's rows, equal to the
    in-process Predictor's (batch 1, as predict runs). Old behaviour: one batch at a time on the pipe."""
    from tphyolo.serve.images import check_request_image

    images = [check_request_image(path.read_bytes(), where=path.name) for path in image_files[:4]]
    expected = Predictor(str(tiny_weights), device="cpu", **SETTINGS)(image_files[:4])
    spec = DetectorSpec((str(tiny_weights),), inference=InferenceConfig(**SETTINGS), device="cpu")
    worker = InferenceWorker(spec, max_batch=1)
    info = worker.start()
    try:
        assert info.streams.source == "rule" and info.stream_count >= 1
        settings = info.defaults
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda image: worker.detect([image], settings, timeout=60)[0][0], images * 2))
    finally:
        worker.stop()
    for rows, result in zip(answers, expected * 2, strict=True):
        assert len(result) > 0
        assert np.array_equal(rows[:, :4], result.boxes.numpy()) and np.array_equal(rows[:, 4], result.scores.numpy())


def test_models_say_the_streams_and_the_batching(server):
    """Old behaviour: /v1/models said max_batch 8 on a CPU, neither streams nor why."""
    import httpx

    model = httpx.get(f"{server}/v1/models", timeout=30).json()["models"][0]
    batching, streams = model["decisions"]["batching"], model["decisions"]["streams"]
    assert model["max_batch"] == 1 and (batching["value"], batching["source"]) == ("1", "rule")
    assert streams["source"] == "rule" and "THROUGHPUT" in streams["why"]
    assert model["streams"] == int(streams["value"]) >= 1


@pytest.mark.slow
def test_models_and_the_ready_line_say_the_streams_and_the_batching(tiny_weights, image_files, caplog):
    """/v1/models and the line logged once the model is ready say how it runs and why; under 8 concurrent
    callers each answer equals the in-process Predictor's exactly (one image per forward). Old behaviour: neither
    said, and batched answers differed in the float rounding of a batched convolution."""
    from tests.serve.conftest import serving

    from tphyolo.serve import Client

    expected = Predictor(str(tiny_weights), device="cpu", **SETTINGS)(image_files)
    with caplog.at_level(logging.INFO, logger="tphyolo.serve.app"), serving(tiny_weights) as (url, _):
        import httpx

        model = httpx.get(f"{url}/v1/models", timeout=30).json()["models"][0]
        order = [i for i in range(len(image_files)) for _ in range(2)]
        with Client(url) as client, ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda i: client.detect(image_files[i]), order))
    batching, streams = model["decisions"]["batching"], model["decisions"]["streams"]
    assert model["max_batch"] == 1 and batching["value"] == "1" and batching["source"] == "rule"
    assert streams["source"] == "rule" and "THROUGHPUT" in streams["why"]
    assert model["streams"] == int(streams["value"]) >= 1
    ready = [r.getMessage() for r in caplog.records if "loaded and warm; ready" in r.getMessage()]
    assert len(ready) == 1 and f"streams {streams['value']} (rule: " in ready[0] and "batching 1 (rule: " in ready[0]
    for i, result in zip(order, results, strict=True):
        assert len(result) > 0
        assert torch.equal(result.boxes, expected[i].boxes) and torch.equal(result.scores, expected[i].scores)

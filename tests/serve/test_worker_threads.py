"""The inference worker's PyTorch threads: all cores but the one the server's event loop keeps, unless
OMP_NUM_THREADS says otherwise (two threads on two shared cores stall every layer's barrier)."""

from __future__ import annotations

import os

import pytest
import torch

from tphyolo.cores import available_cores
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.serve.engine import configure_worker_threads, worker_threads
from tphyolo.serve.worker import InferenceWorker


def test_a_cpu_worker_leaves_one_core_to_the_server():
    assert [worker_threads(usable_cores=n, environ={}) for n in (1, 2, 4, 16)] == [1, 1, 3, 15]
    assert worker_threads(usable_cores=16, environ={"OMP_NUM_THREADS": "4"}) is None  # the user's choice wins
    assert worker_threads(usable_cores=2, environ={"OMP_NUM_THREADS": ""}) == 1


def test_a_cpu_worker_counts_the_cores_where_the_os_has_no_affinity_mask(monkeypatch):
    # Before, configure_worker_threads called os.sched_getaffinity unguarded: AttributeError on macOS / Windows.
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    asked = []
    monkeypatch.setattr(torch, "set_num_threads", asked.append)  # this process keeps its threads
    configure_worker_threads(DetectorSpec(("unused.pt",), device="cpu"))
    assert asked == [5]


@pytest.mark.slow
@pytest.mark.skipif("OMP_NUM_THREADS" in os.environ, reason="OMP_NUM_THREADS decides the threads")
def test_the_worker_process_runs_with_its_threads(tiny_weights):
    spec = DetectorSpec((str(tiny_weights),), inference=InferenceConfig(imgsz=64), device="cpu")
    worker = InferenceWorker(spec, max_batch=2)
    try:
        info = worker.start()
    finally:
        worker.stop()
    expected = worker_threads(usable_cores=available_cores(), environ=os.environ)
    assert info.threads == expected and info.as_json()["threads"] == expected

"""`tphyolo bench serve`'s arithmetic, its progress line and its loopback rule, on made-up load results (the load
itself runs in tests/serve against a real server)."""

from __future__ import annotations

from collections import Counter

import pytest

from tphyolo.bench.serve.bench import _Level, _rows
from tphyolo.bench.serve.load import LoadResult, Progress, check_loopback, rss_mb
from tphyolo.bench.serve.stages import STAGES

STAGES_MS = {"check": 0.2, "decode": 8.0, "letterbox": 2.0, "forward": 60.0, "nms": 1.5, "encode": 0.5}
FORWARD_MS = {1: 70.0, 4: 65.0, 8: 66.0}


def test_only_loopback_urls_are_loaded():
    assert check_loopback("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert check_loopback("http://localhost:9") == "http://localhost:9"
    for url in ("http://10.0.0.5:8000", "https://127.0.0.1:8000", "http://example.com"):
        with pytest.raises(ValueError, match="loopback"):
            check_loopback(url)


def test_merged_runs_add_up():
    a = LoadResult(2.0, [0.1] * 10, Counter({200: 10}), 2.0, [{"queue_ms": 1.0}] * 10)
    b = LoadResult(3.0, [0.3] * 30, Counter({200: 30, 503: 2}), 6.0, [{"queue_ms": 4.0}] * 30)
    both = a.merged(b)
    assert both.seconds == 5.0 and both.throughput == 8.0
    assert both.statuses == Counter({200: 40, 503: 2})
    assert both.mean_batch == 5.0  # (2 x 10 + 6 x 30) / 40 images
    assert both.percentile_ms(50) == 300.0
    assert both.stage_ms("queue_ms") == 4.0 and both.stage_ms("total_ms") is None


def _timed(queue: float, worker: float, total: float) -> list[dict]:
    return [{"queue_ms": queue, "inference_ms": worker, "total_ms": total}]


def test_each_row_name_has_one_baseline():
    batched_16 = LoadResult(10.0, [0.5] * 40, Counter({200: 40}), 8.0, _timed(200, 250, 480) * 40)  # 4 images/s
    plain_16 = LoadResult(10.0, [1.0] * 20, Counter({200: 20, 504: 1}), 1.0, _timed(900, 60, 990) * 20)  # 2/s
    levels = {
        (None, 16): _Level(batched_16, 900.0),
        (1, 16): _Level(plain_16, 700.0),
        (None, 1): _Level(LoadResult(10.0, [0.2] * 50, Counter({200: 50}), 1.0, _timed(5, 70, 90) * 50), 880.0),
        (1, 1): _Level(LoadResult(10.0, [0.25] * 40, Counter({200: 40}), 1.0, _timed(0.1, 70, 85) * 40), 690.0),
    }
    predict = {"worker threads": 150.0, "with decoding": 160.0, "default threads": 900.0}
    rows = {(r.name, r.config): r for r in _rows(levels, predict, stages=STAGES_MS, forward=FORWARD_MS, threads=1)}
    batched = rows[("serve batching", "c=16 max_batch=default vs 1")]
    assert (batched.ours_ms, batched.baseline_ms, batched.speedup) == (250.0, 500.0, 2.0)
    assert (batched.ours_peak_mb, batched.baseline_peak_mb) == (900.0, 700.0)  # server + worker resident MiB
    assert batched.extra["mean_batch"] == 8.0
    assert {r.baseline_ms for (name, _), r in rows.items() if name == "serve vs predict"} == {150.0}
    plain = rows[("serve vs predict", "c=16 max_batch=1")]
    assert plain.extra["errors"] == {"504": 1} and plain.extra["predict_ms_default_threads"] == 900.0
    batching = [config for name, config in rows if name == "serve batching"]
    assert batching == ["c=16 max_batch=default vs 1", "c=1 max_batch=default vs 1"]
    p99 = rows[("serve p99", "c=1 max_batch=default vs 1")]
    assert (p99.ours_ms, p99.baseline_ms) == (200.0, 250.0)
    decoded = rows[("serve vs predict+decode", "c=16 max_batch=default")]
    assert (decoded.ours_ms, decoded.baseline_ms) == (250.0, 160.0)  # 4 images/s against predict with decoding
    p50 = rows[("serve p50 vs predict+decode", "c=1 max_batch=default")]
    assert (p50.ours_ms, p50.baseline_ms) == (200.0, 160.0)


def test_stages_add_up_to_what_the_client_waited():
    levels = {(None, 4): _Level(LoadResult(1.0, [0.2] * 4, Counter({200: 4}), 2.0, _timed(5, 120, 150) * 4))}
    predict = {"worker threads": 100.0, "with decoding": 110.0, "default threads": 100.0}
    rows = {(r.name, r.config): r for r in _rows(levels, predict, stages=STAGES_MS, forward=FORWARD_MS, threads=2)}
    stage = {config: r.ours_ms for (name, config), r in rows.items() if name == "serve stage"}
    assert [stage[f"{s} in-process"] for s in STAGES] == [0.2, 8.0, 2.0, 60.0, 1.5, 0.5]
    where = "c=4 max_batch=default"
    assert stage[f"queue {where}"] == 5.0 and stage[f"worker {where}"] == 120.0
    assert stage[f"hop {where}"] == 25.0  # 150 total - 5 queue - 120 worker
    assert stage[f"http {where}"] == 50.0  # 200 at the client - 150 in the service
    assert rows[("serve forward", "batch 4 per image")].ours_ms == 65.0
    assert all(r.baseline_ms is None for (name, _), r in rows.items() if name in ("serve stage", "serve forward"))
    assert not any(name == "serve batching" for name, _ in rows)  # no max_batch 1 server: no batching row


def test_progress_says_where_the_load_is_at_most_every_period_and_at_the_end():
    lines, now = [], [100.0]
    progress = Progress("max_batch 8 c=16", 5, log=lines.append, every_s=10.0, clock=lambda: now[0])
    for step in (3.0, 4.0, 5.0, 1.0, 1.0):  # answers at 103, 107, 112, 113, 114 s
        now[0] += step
        progress(0, 200, None)
    assert lines == ["max_batch 8 c=16: 3/5 answers, 12 s", "max_batch 8 c=16: 5/5 answers, 14 s"]


def test_resident_memory_is_read_from_proc():
    import os
    from pathlib import Path

    status = Path(f"/proc/{os.getpid()}/status").read_text()
    kb = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines() if line.startswith("Vm")}
    assert rss_mb(os.getpid(), peak=True) >= kb["VmHWM"] / 1024 - 1  # the peak only grows
    assert abs(rss_mb(os.getpid()) - kb["VmRSS"] / 1024) < 64  # the same field, a moment later
    assert rss_mb(os.getpid()) > 10


@pytest.fixture(scope="module")
def tiny_predictor(tmp_path_factory):
    from tests.helpers import seeded_checkpoint

    from tphyolo.predict.predictor import Predictor

    weights = seeded_checkpoint(tmp_path_factory.mktemp("bench-serve") / "tiny.pt", ["car", "van"])
    return Predictor(str(weights), imgsz=64, device="cpu", conf=0.001)


def test_in_process_steps_are_timed_by_the_bench_timer(tiny_predictor, monkeypatch):
    import cv2
    import numpy as np

    from tphyolo.bench.serve import bench, stages
    from tphyolo.bench.timing import Timing

    image = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    body = cv2.imencode(".jpg", image)[1].tobytes()
    measured = stages.stage_times(tiny_predictor, body, threads=1, repeats=1)
    assert list(measured) == list(STAGES) and all(ms > 0 for ms in measured.values())
    assert bench.predict_ms(tiny_predictor, image, 1) > 0 and bench.predict_decoded_ms(tiny_predictor, body, 1) > 0

    calls = []

    def fake_time_calls(fns, *, device, warmup, repeats):  # 12 ms per call, whatever the batch
        calls.extend(fn() for fn in fns)  # each runs the model once, on its own batch size
        return [Timing(12.0, 0.0, 12.0, repeats) for _ in fns]

    monkeypatch.setattr(stages, "time_calls", fake_time_calls)
    per_image = stages.forward_per_image(tiny_predictor, image, batches=(1, 4), threads=1, repeats=1)
    assert per_image == {1: 12.0, 4: 3.0}
    assert [len(out) for out in calls] == [1, 4]

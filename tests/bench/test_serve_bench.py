"""`tphyolo bench serve`'s arithmetic and its loopback rule, on made-up load results (the load itself runs in
tests/serve against a real server)."""

from __future__ import annotations

from collections import Counter

import pytest

from tphyolo.bench.serve import LoadResult, _rows, check_loopback


def test_only_loopback_urls_are_loaded():
    assert check_loopback("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert check_loopback("http://localhost:9") == "http://localhost:9"
    for url in ("http://10.0.0.5:8000", "https://127.0.0.1:8000", "http://example.com"):
        with pytest.raises(ValueError, match="loopback"):
            check_loopback(url)


def test_merged_runs_add_up():
    a = LoadResult(2.0, [0.1] * 10, Counter({200: 10}), 2.0)
    b = LoadResult(3.0, [0.3] * 30, Counter({200: 30, 503: 2}), 6.0)
    both = a.merged(b)
    assert both.seconds == 5.0 and both.throughput == 8.0
    assert both.statuses == Counter({200: 40, 503: 2})
    assert both.mean_batch == 5.0  # (2 x 10 + 6 x 30) / 40 images
    assert both.percentile_ms(50) == 300.0


def test_rows_compare_batching_with_max_batch_1_and_max_batch_1_with_predict():
    results = {
        (None, 16): LoadResult(10.0, [0.5] * 40, Counter({200: 40}), 8.0),  # 4 images/s
        (1, 16): LoadResult(10.0, [1.0] * 20, Counter({200: 20, 504: 1}), 1.0),  # 2 images/s
        (None, 1): LoadResult(10.0, [0.2] * 10, Counter({200: 10}), 1.0),
    }
    rows = {(r.name, r.config): r for r in _rows(results, baseline_ms=150.0)}
    batched = rows[("serve", "c=16 max_batch=default")]
    assert (batched.ours_ms, batched.baseline_ms, batched.speedup) == (250.0, 500.0, 2.0)
    assert batched.extra["baseline"] == "max_batch 1, same concurrency" and batched.extra["mean_batch"] == 8.0
    plain = rows[("serve", "c=16 max_batch=1")]
    assert plain.baseline_ms == 150.0 and plain.extra["errors"] == {"504": 1}
    p99 = rows[("serve p99", "c=1 max_batch=default")]
    assert (p99.ours_ms, p99.baseline_ms) == (200.0, 150.0)

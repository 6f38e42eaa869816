"""The service's metrics as Prometheus reads them."""

from __future__ import annotations

from tphyolo.serve.metrics import ServiceMetrics


def test_worker_restarts_are_a_counter_under_their_documented_name():
    restarts = [0]
    metrics = ServiceMetrics(queue_depth=lambda: 2, restarts=lambda: restarts[0])
    restarts[0] = 3
    text = metrics.text()[0].decode()
    assert "# TYPE tphyolo_worker_restarts_total counter" in text
    assert "\ntphyolo_worker_restarts_total 3.0\n" in text
    assert "\ntphyolo_queue_depth 2.0\n" in text

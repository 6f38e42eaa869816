"""Rows, the printed table and the JSON layout."""

import json

import torch

from tphyolo.bench.report import Row, format_table, machine_info, write_json


def test_speedup_is_baseline_over_ours():
    assert Row("a", "c", ours_ms=2.0, baseline_ms=5.0).speedup == 2.5
    assert Row("a", "c", ours_ms=2.0).speedup is None
    assert Row("a", "c", ours_ms=None, baseline_ms=3.0).speedup is None


def test_json_layout(tmp_path):
    rows = [Row("attention/c3tr", "cfg", 2.0, 4.0, ours_peak_mb=1.0, baseline_peak_mb=3.0, extra={"kernel": "x"})]
    machine = machine_info(torch.device("cpu"), matmul_gflops=1.0)
    data = json.loads(write_json(tmp_path / "sub" / "out.json", machine, rows).read_text())
    assert {"cpu", "torch_threads", "torch", "device", "memory_method", "matmul_gflops"} <= set(data["machine"])
    (row,) = data["rows"]
    for key in ("name", "config", "baseline_ms", "ours_ms", "speedup", "baseline_peak_mb", "ours_peak_mb"):
        assert key in row
    assert row["speedup"] == 2.0
    assert row["extra"] == {"kernel": "x"}


def test_table_has_a_line_per_row():
    table = format_table([Row("a", "first", 1.0, 2.0), Row("b", "second", None, 2.0)])
    lines = table.splitlines()
    assert len(lines) == 4
    assert "2.00x" in lines[2] and "second" in lines[3]


def test_measured_numbers_keep_significant_digits_never_a_rounded_zero():
    """A fast export took 0.04 s and was written as round(0.04, 1) = 0.0; the rows keep 3 significant digits."""
    from tphyolo.bench.report import significant

    assert significant(0.0412345) == 0.0412 and significant(1234.5678) == 1230.0 and significant(0.0) == 0.0
    assert significant(3e-7) > 0

"""Benchmark results: one `Row` per comparison, the machine they ran on, a printed table and a JSON file.

JSON layout: {"machine": {...}, "rows": [{"name", "config", "baseline_ms", "ours_ms", "speedup",
"baseline_peak_mb", "ours_peak_mb", ...}, ...]}. Times are medians in milliseconds per call; `speedup` is
baseline_ms / ours_ms; a null baseline means the comparison has no baseline on this machine (see `extra`).
Measured numbers in `extra` (seconds, rates, ratios) keep 3 significant digits (`significant`): a fast step
is 0.0123 s, never a rounded 0.0.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from tphyolo.bench.timing import memory_method
from tphyolo.runtime.cpu_isa import cpu_info


def significant(value: float, digits: int = 3) -> float:
    """`value` to `digits` significant digits: short to print, and never 0 unless it was 0."""
    return float(f"{value:.{digits}g}")


@dataclass(frozen=True)
class Row:
    """One measured comparison. `config` is a short human-readable description of what ran."""

    name: str
    config: str
    ours_ms: float | None
    baseline_ms: float | None = None
    ours_peak_mb: float | None = None
    baseline_peak_mb: float | None = None
    ours_spread_ms: float | None = None
    baseline_spread_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        if self.baseline_ms is None or self.ours_ms is None or self.ours_ms <= 0:
            return None
        return self.baseline_ms / self.ours_ms

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["speedup"] = self.speedup
        return data


def machine_info(device: torch.device, **measured: Any) -> dict[str, Any]:
    """What the numbers were measured on; `measured` adds entries such as the matmul rate."""
    info: dict[str, Any] = {
        "cpu": cpu_info().model,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(device),
        "memory_method": memory_method(device),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1), cuda=torch.version.cuda)
    info.update(measured)
    return info


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(rows: list[Row]) -> str:
    """A fixed-width text table of `rows`."""
    header = ("name", "config", "baseline ms", "ours ms", "speedup", "base MiB", "ours MiB", "notes")
    lines = [
        (
            r.name,
            r.config,
            _fmt(r.baseline_ms, ".2f") + ("" if r.baseline_spread_ms is None else f" ±{r.baseline_spread_ms:.1f}"),
            _fmt(r.ours_ms, ".2f") + ("" if r.ours_spread_ms is None else f" ±{r.ours_spread_ms:.1f}"),
            _fmt(r.speedup, ".2f") + ("x" if r.speedup is not None else ""),
            _fmt(r.baseline_peak_mb, ".1f"),
            _fmt(r.ours_peak_mb, ".1f"),
            ", ".join(f"{k}={v}" for k, v in r.extra.items()),
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines, strict=True)]
    out = ["  ".join(str(x).ljust(w) for x, w in zip(header, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    return "\n".join(out)


def write_json(path: str | Path, machine: dict[str, Any], rows: list[Row]) -> Path:
    """Writes {"machine": ..., "rows": [...]} to `path` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine, "rows": [r.to_json() for r in rows]}, indent=2) + "\n")
    return path


def print_report(rows: list[Row], machine: dict[str, Any], *, json_path: str | Path | None = None) -> None:
    """Prints the table of `rows` and the machine and, given `json_path`, writes them there (`write_json`)."""
    print()
    print(format_table(rows))
    print("\nmachine: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    if json_path:
        print(f"wrote {write_json(json_path, machine, rows)}")

"""Time to the first training step, by phase: where a run's start-up goes.

`StartupClock` is started with the process's age (so the first phase, "imports", covers the interpreter's
start, the imports and argument parsing), then `mark(phase)` closes each phase at the moment it ends. The
phases are consecutive, so they add up to the total by construction. `Trainer` marks: setup (run folder,
process group), data (dataset scan and cache, loaders), model (build, transfer, anchors), optimiser (optimiser,
schedule, EMA, resume state), compile (DDP and torch.compile wrapping; graphs compile lazily, in the first
step), first batch (loader workers up, first batch read) and first step (forward, loss, backward and optimiser
step of the first batch, including graph compilation under --compile). The record goes to the console and to
`startup.json` in the run folder, with the compile caches' hits and misses under --compile.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from tphyolo.runtime.compile_cache import cache_counters

T = TypeVar("T")
LOGGER = logging.getLogger("tphyolo.train")


def process_age() -> float | None:
    """Seconds since this process started (Linux: from /proc), or None where that is not available."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))  # field 22: start time in ticks
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class StartupClock:
    """Consecutive phases from the process's start (or from the clock's creation where the process's age is
    unknown: then there is no "imports" phase) to the first training step."""

    def __init__(self) -> None:
        age = process_age()
        now = time.perf_counter()
        self._origin = now - (age or 0.0)
        self._last = self._origin
        self.phases: dict[str, float] = {}
        self.notes: dict[str, object] = {}  # recorded beside the phases (e.g. compile-cache hits)
        if age is not None:
            self.mark("imports", at=now)

    def mark(self, phase: str, *, at: float | None = None) -> None:
        """Close `phase`: it lasted from the previous mark to now (or `at`, a `time.perf_counter()` value)."""
        now = time.perf_counter() if at is None else at
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self._last
        self._last = now

    @property
    def total(self) -> float:
        """Seconds from the origin to the last mark: the sum of the phases."""
        return self._last - self._origin

    def first_step(self, batches: Iterable[T], done: Callable[[StartupClock], None]) -> Iterator[T]:
        """`batches`, marking "first batch" when the first one arrives and "first step" when the loop asks for
        the next one (or ends) after it; then `done(self)` is called once."""
        for i, batch in enumerate(batches):
            if i == 0:
                self.mark("first batch")
            yield batch
            if i == 0:
                self.mark("first step")
                done(self)
        if "first step" not in self.phases:  # an empty loader
            done(self)

    def report(self, run_dir: Path | None, *, compiled: bool) -> None:
        """Notes the compile cache's counters (`compiled`), logs the time to the first step and writes it to
        `run_dir`/startup.json (the main process's; None on the others)."""
        if compiled:
            self.notes["compile_cache"] = cache_counters()
        if run_dir is not None:
            cache = self.notes.get("compile_cache")
            LOGGER.info("%s%s", self.summary(), f"; compile cache {cache}" if cache else "")
            self.write(run_dir / "startup.json")

    def summary(self) -> str:
        """One line: the total and each phase, in seconds."""
        parts = ", ".join(f"{name} {seconds:.2f}" for name, seconds in self.phases.items())
        return f"time to first step {self.total:.2f} s ({parts})"

    def to_dict(self) -> dict:
        phases = {k: round(v, 4) for k, v in self.phases.items()}
        return {"total_s": round(self.total, 4), "phases_s": phases, **self.notes}

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")

"""When a runtime probe's kept choice is measured again: one taken on a busy machine or by a margin within the
timings' noise is provisional, and every choice ages. The compiled runtime's bf16 check
(`tphyolo.infer.backends.bf16_check`) keeps its verdicts by the same rule.

A choice is measured under `Conditions` (the 1-minute load average, the CPU cores, the time) and kept with its
`Freshness`. It is *provisional* when it was measured on a loaded machine (`Conditions.loaded`: a load average
above the core count means runnable processes waited for a core, so the steps timed other work too) or when
the decision was closer than the timings' spread (`margin` at most `spread`: the same steps measured again could
have chosen otherwise). A later run measures a provisional choice again when it finds the machine not loaded,
at most MAX_REMEASURES times; after that the choice is kept as it is (a machine that is always busy, or two
candidates that are truly equal, would otherwise be timed on every run). A loaded run reuses a provisional
choice rather than timing again under load. Every choice, provisional or not, is measured again once it is
older than MAX_AGE_DAYS.

Where the numbers come from: the load rule is the usual reading of the load average (runnable processes per
core, above 1 a queue); two more measurements bound the cost of a provisional choice to three probes, a few
seconds each (`tphyolo.runtime.probe.BUDGET_S`), and give a quiet run two chances; 30 days is a month of kernel,
driver, firmware and BIOS updates that change speed without changing the cache key (which already holds the CPU,
torch version and threads).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tphyolo.errors import InputError

MAX_REMEASURES = 2  # a provisional choice is measured again at most this many times, then kept
MAX_AGE_DAYS = 30  # a choice older than this is measured again
DAY_S = 86400.0


@dataclass(frozen=True)
class Conditions:
    """The machine at one moment: `load` (the 1-minute load average), `cores` (the CPUs the system has, what the
    load average counts against) and `time` (seconds since the epoch)."""

    load: float
    cores: int
    time: float

    @property
    def loaded(self) -> bool:
        """Whether more processes were runnable than there are cores: timings then include waiting."""
        return self.load > self.cores


def current_conditions() -> Conditions:
    """This machine now; a platform without a load average (Windows) reads as unloaded."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        load = 0.0
    return Conditions(load=round(load, 2), cores=os.cpu_count() or 1, time=time.time())


def spread(samples: Sequence[float]) -> float:
    """How much one candidate's timed steps varied: (max - min) / median; 0 for a single step."""
    return (max(samples) - min(samples)) / statistics.median(samples) if len(samples) > 1 else 0.0


@dataclass(frozen=True)
class Freshness:
    """What is kept beside a choice to decide when to measure it again: when it was measured (`measured_at`,
    epoch seconds), the `load` and `cores` then, the largest `spread` of the candidates' steps, the decision's
    `margin` (how far, relatively, the winning times were from deciding otherwise; `probe.decision_margin`), and
    `remeasures`, how many times a provisional choice has already been measured again."""

    measured_at: float
    load: float
    cores: int
    spread: float
    margin: float
    remeasures: int = 0

    @classmethod
    def measured(cls, conditions: Conditions, *, spread: float, margin: float, remeasures: int) -> Freshness:
        return cls(measured_at=conditions.time, load=conditions.load, cores=conditions.cores,
                   spread=round(spread, 4), margin=round(margin, 4), remeasures=remeasures)  # fmt: skip

    @property
    def provisional(self) -> bool:
        """Measured on a loaded machine, or decided within the noise (margin at most the spread)."""
        return self.load > self.cores or self.margin <= self.spread

    def why_provisional(self) -> str:
        if self.load > self.cores:
            return f"load {self.load:.1f} on {self.cores} cores"
        return f"won by {self.margin:.0%}, within the timings' spread of {self.spread:.0%}"

    def due(self, now: Conditions) -> str | None:
        """Why the choice is to be measured again `now`, or None when it stands."""
        if now.time - self.measured_at > MAX_AGE_DAYS * DAY_S:
            return f"measured over {MAX_AGE_DAYS} days ago"
        if self.provisional and self.remeasures < MAX_REMEASURES and not now.loaded:
            return f"provisional ({self.why_provisional()}) and the machine is quieter now (load {now.load:.1f})"
        return None

    def next_remeasures(self, now: Conditions) -> int:
        """The `remeasures` of the choice measured again `now`: one more for a provisional one, 0 for an aged one."""
        aged = now.time - self.measured_at > MAX_AGE_DAYS * DAY_S
        return 0 if aged else self.remeasures + 1

    def as_json(self) -> dict[str, Any]:
        return {"measured_at": round(self.measured_at, 1), "load": self.load, "cores": self.cores,
                "spread": self.spread, "margin": self.margin, "remeasures": self.remeasures,
                "provisional": self.provisional}  # fmt: skip

    @classmethod
    def from_json(cls, entry: object) -> Freshness:
        """The freshness kept in a cache entry; an entry kept before choices had one reads as measured at the
        epoch (so it is measured again). Raises ValueError, KeyError or TypeError for a malformed one."""
        if entry is None:
            return cls(measured_at=0.0, load=0.0, cores=1, spread=0.0, margin=1.0)
        if not isinstance(entry, dict):
            raise InputError("its 'measured' is not an object")
        remeasures = entry["remeasures"]
        if type(remeasures) is not int or remeasures < 0:
            raise InputError(f"its remeasures {remeasures!r:.20} is not a count")
        return cls(measured_at=float(entry["measured_at"]), load=float(entry["load"]), cores=int(entry["cores"]),
                   spread=float(entry["spread"]), margin=float(entry["margin"]), remeasures=remeasures)  # fmt: skip

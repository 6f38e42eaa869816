"""A run of units of work shared by the ranks of a torchrun run, and, given a run folder, journaled and resumable:
the one shape of every resumable sharded run (a folder or video prediction, a raster's rows of tiles).

    runner = UnitRunner(keys, dist=dist, journal=RunJournal(run_dir, read=UnitRecord.from_json, resume=True))
    for k in runner.mine:            # this rank's share of the units left
        runner.finish(k, work(k))    # journaled at once: a stop loses at most the unit under way
    gathered = runner.gather()       # rank 0: every unit's record in unit order (None on the other ranks)

The steps, in order: a resumed run reads the records its journal holds of finished units (each line checked,
a bad one reported on rank 0 and its unit redone: `journal`); a new one clears the journal; every rank
waits for the others (no rank journals into a folder rank 0 is still clearing); the units left are dealt and
gathered back in one-process order as `runtime.sharding` states (`UnitDeal`); each rank journals the units it
finishes and counts its progress over all ranks (`count`); rank 0 puts every rank's records, with those finished
before, in unit order -- the order one uninterrupted process finishes them in, whatever the number of processes
and of stops.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from tphyolo.predict.runner.journal import Journal, Record, clear_journal, finished_records
from tphyolo.runtime.distributed import DistContext, GlobalCount, barrier
from tphyolo.runtime.sharding import ONE_PROCESS, UnitDeal

R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class RunJournal(Generic[R]):
    """Where a run journals its finished units (`run_dir`), how a journal line is read back (`read`: a line ->
    its record, ValueError saying what is wrong), whether the run continues that journal (`resume`) or clears
    it, and who is told of a bad line (`on_bad`, on rank 0; its unit is redone)."""

    run_dir: Path
    read: Callable[[str], R]
    resume: bool = False
    on_bad: Callable[[str], None] | None = field(default=None, compare=False)


class UnitRunner(Generic[R]):
    """One rank's part of a run of the units named `keys` (each as its record's `unit` names it), shared by the
    ranks of `dist` and, with a `journal`, journaled and resumable (module docstring). Every rank builds it at
    the same point with the same arguments. `before`: the records a resume found, by unit index; `left`: the
    units to run, all ranks'; `mine`: this rank's, in the order to run them."""

    def __init__(self, keys: Sequence[Hashable], *, dist: DistContext = ONE_PROCESS,
                 journal: RunJournal[R] | None = None) -> None:  # fmt: skip
        self.keys = list(keys)
        self.before: dict[int, R] = {}
        if journal is not None:
            if journal.resume:
                report = journal.on_bad if dist.is_main else None  # every rank reads the journals; one reports
                found = {r.unit: r for r in finished_records(journal.run_dir, read=journal.read, units=self.keys,
                                                             on_bad=report)}  # fmt: skip
                self.before = {k: found[key] for k, key in enumerate(self.keys) if key in found}
            elif dist.is_main:
                clear_journal(journal.run_dir)
            barrier(dist)
        self.deal = UnitDeal.of(len(self.keys), dist=dist, done=list(self.before))
        self.finished: dict[int, R] = {}
        self._journal = None if journal is None else Journal(journal.run_dir, dist.rank)
        self._counter = GlobalCount(dist)

    @property
    def left(self) -> tuple[int, ...]:
        return self.deal.left

    @property
    def mine(self) -> tuple[int, ...]:
        return self.deal.mine

    def finish(self, index: int, record: R) -> None:
        """Unit `index` (one of `mine`) is finished: its record is journaled, then kept for `gather`."""
        if index not in self.mine or index in self.finished:
            raise ValueError(f"unit {index} is not one this rank has left to run")
        if self._journal is not None:
            self._journal.record(record)
        self.finished[index] = record

    def count(self, amount: int) -> int:
        """Adds `amount` to the run's progress (frames, tiles); returns the total so far over all ranks."""
        return self._counter.add(amount)

    def records(self) -> list[R]:
        """The records this rank knows of: those finished before, then its own, each in unit order."""
        return [*self.before.values(), *(self.finished[k] for k in sorted(self.finished))]

    def gather(self, *, summary: Any = None) -> tuple[list[R], list[Any]] | None:
        """On rank 0: every unit's record in unit order (those finished before included) and every rank's
        `summary` in rank order; None on the other ranks. Every rank calls it once its `mine` are finished;
        ValueError when one of them is not."""
        missing = [k for k in self.mine if k not in self.finished]
        if missing:
            raise ValueError(f"rank {self.deal.dist.rank}: unit {missing[0]} of {len(missing)} left is not finished")
        records, summaries = self.deal.gather([self.finished[k] for k in self.mine], summary=summary,
                                              before=self.before)  # fmt: skip
        return None if records is None else (records, summaries)

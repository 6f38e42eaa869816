"""One interleaved timer: the calls of several candidates timed in turn (A B, B A, A B, ...), so that a machine
whose load changes while they are measured slows them alike. `tphyolo doctor --tune`, the bf16 check and
`tphyolo bench` all time with it; tests inject the clock."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from tphyolo.errors import InputError


def time_interleaved(
    calls: Sequence[Callable[[], object]],
    *,
    warmup: int = 1,
    rounds: int = 3,
    budget_s: float = math.inf,
    clock: Callable[[], float] = time.perf_counter,
    after_call: Callable[[], None] | None = None,
) -> list[list[float]]:
    """Each call's seconds per timed run: `warmup` untimed runs of each, then up to `rounds` rounds in which every
    call runs once, by `clock`, the order reversed every other round; no round starts once `budget_s` seconds
    have gone into timed rounds (the first always runs). `after_call` runs inside the timed span after each call
    (a device synchronisation)."""
    if rounds < 1 or warmup < 0:
        raise InputError(f"timing needs at least one round and no negative warm-up, got {rounds} and {warmup}")
    for call in calls:
        for _ in range(warmup):
            call()
    if after_call is not None:
        after_call()
    samples: list[list[float]] = [[] for _ in calls]
    order = list(range(len(calls)))
    start = clock()
    for round_index in range(rounds):
        for index in order if round_index % 2 == 0 else order[::-1]:
            began = clock()
            calls[index]()
            if after_call is not None:
                after_call()
            samples[index].append(clock() - began)
        if clock() - start >= budget_s:
            break
    return samples

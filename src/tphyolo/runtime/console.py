"""What the Python API shows and tells while it works: the progress log lines the CLI prints, or nothing, and
`RunEvents`, the one events type of every command's run function.

The CLI configures logging once in its entry point; a script that calls `tphyolo.train(...)` usually has not,
and Python then drops INFO records. `progress_output` fills that gap for the duration of one call and leaves
the process's logging as it found it.

Each command is a frozen job and one call of the same shape, `run_X(job, *, runtime=None, events=NO_EVENTS)`
(`run_predict`, `track_job`, `run_val`, `run_analyze`, `run_serve`; `run_export`, whose device is its job's, takes
no runtime). What the run does is the job's (the device too: its `DetectorSpec`'s); what the caller sees while it
runs is the events':

    run_predict(job, events=RunEvents(note=print, progress=True))

A run calls only the events that concern it and ignores the others; an event left None is not told (a run
whose `skip` is None stops at a file that does not decode, unless its docstring names a default).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE_LOGGER = "tphyolo"


class ProgressBarHandler(logging.StreamHandler):
    """A stream handler that writes each record through `tqdm.write`, which clears the open progress bars first
    and draws them again after: a line logged while a bar runs (the time to the first step, a warning) gets a
    line of its own instead of being printed onto the bar's."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # logging's rule: a failing handler reports itself and never raises
            self.handleError(record)


@contextlib.contextmanager
def progress_output(verbose: bool) -> Iterator[None]:
    """While open: with `verbose`, the package's INFO records go to stdout as bare messages, each on a line of
    its own whatever progress bars are drawn (`ProgressBarHandler`), and not also to the root's handlers --
    unless the caller's logging already shows them (INFO enabled and a handler to take it), which is then left
    alone; without `verbose`, the package logs warnings and errors only. Restores the logger on exit."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    level, propagate = logger.level, logger.propagate
    handler = None
    if not verbose:
        logger.setLevel(logging.WARNING)
    elif not (logger.isEnabledFor(logging.INFO) and logger.hasHandlers()):
        handler = ProgressBarHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    try:
        yield
    finally:
        if handler is not None:
            logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


@dataclass(frozen=True)
class RunEvents:
    """The caller's side of a run, every field optional.

    note(text): a warning or a line of what the run does (a frame that decodes in part, a source of a resumed run
    that is gone, an export's summary line); skip(item, error): an input that does not decode, skipped (a file or
    stream; on the torchrun rank that met it); item_done(item): one unit of the run finished (track: each
    `SequenceRun`); raster_opened(path, width, height, tiles): a raster source opened, before its first tile;
    listening(host, port): a service listening; progress: show a progress bar (on rank 0)."""

    note: Callable[[str], None] | None = None
    skip: Callable[[Any, Exception], None] | None = None
    item_done: Callable[[Any], None] | None = None
    raster_opened: Callable[[Path, int, int, int], None] | None = None
    listening: Callable[[str, int], None] | None = None
    progress: bool = False

    def tell(self, text: str) -> None:
        """`note(text)`, when a note is listened for."""
        if self.note is not None:
            self.note(text)


NO_EVENTS = RunEvents()  # every run function's default: nothing told, no progress bar

"""What the Python API shows while it works: the progress log lines the CLI prints, or nothing.

The CLI configures logging once in its entry point; a script that calls `tphyolo.train(...)` usually has not,
and Python then drops INFO records. `progress_output` fills that gap for the duration of one call and leaves
the process's logging as it found it.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

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

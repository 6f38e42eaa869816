"""The Ray cluster a search runs on, and where Ray's own output goes.

`ray_cluster` starts Ray inside the process with this machine's CPUs and GPUs (the default), joins a running
cluster (`address`: "auto" or HOST:PORT), or uses the one the caller already started (`ray.init` before the
search); only what it started, it shuts down. The dashboard stays off unless asked for.

`ray_output_to(path)` sends everything Ray, Tune and Optuna print while a search runs (their loggers, the
driver's stdout and stderr: Tune's status tables, warnings) to a log file, so that the search's own lines stay
readable; the trials' processes write their own logs (`log_to_driver=False`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from tphyolo.errors import InputError

TUNE_EXTRA = 'pip install -e ".[tune]"'  # or pip install "tphyolo[tune]"
LOGGERS_WITH_HANDLERS = ("ray", "optuna")  # loggers that print on their own (propagate=False)


def require_ray_tune() -> None:
    """Raises ImportError in one line naming the extra when Ray Tune or Optuna cannot be imported."""
    try:
        import optuna  # noqa: F401
        import ray.tune  # noqa: F401
    except ImportError as error:
        raise ImportError(f"hyperparameter search needs Ray Tune and Optuna ({error}); install the extra: "
                          f"{TUNE_EXTRA}") from None  # fmt: skip


@contextlib.contextmanager
def ray_output_to(path: Path) -> Iterator[TextIO]:
    """While inside, the loggers of LOGGERS_WITH_HANDLERS and the process's stdout and stderr write to the file
    `path` (appended to); yields the stdout the caller had, for the lines meant for the user."""
    user = sys.stdout
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as log:
        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        saved = {}
        for name in LOGGERS_WITH_HANDLERS:
            logger = logging.getLogger(name)
            saved[name] = logger.handlers[:]
            logger.handlers[:] = [handler]
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                yield user
        finally:
            for name, handlers in saved.items():
                logging.getLogger(name).handlers[:] = handlers


@contextlib.contextmanager
def ray_cluster(*, address: str | None = None, dashboard: bool = False) -> Iterator[dict[str, float]]:
    """Ray, ready for a search (module docstring); yields the cluster's resources ({"CPU": 16.0, "GPU": 2.0,
    ...}). Raises ValueError when `address` is given while the process is already connected elsewhere."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=dashboard, log_to_driver=False)
    elif address is not None:
        raise InputError(f"Ray is already running in this process; cannot also join {address}")
    try:
        yield dict(ray.cluster_resources())
    finally:
        if started:
            ray.shutdown()

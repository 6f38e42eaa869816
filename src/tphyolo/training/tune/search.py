"""A hyperparameter search on Ray Tune, as `tphyolo tune` runs it, and its Python form `tphyolo.tune(...)`.

    result = tphyolo.tune(data="my.yaml", model="tph-yolov5s", epochs=30, trials=50, img=640)
    result.best_hyp, result.trials, result.table()

The search runs in one folder (`runs/tune/exp`): tune.yaml (its settings, which `resume` reads), trials.csv (a
row per trial, kept current), trials/trialN/ (each trial's training run and hyp.yaml), best_hyp.yaml and
trials.png at the end, and ray.log with everything Ray, Tune and Optuna printed. While it runs it prints a
line per trial that ends; at the end, the fittest trials.

Ray runs inside the process with this machine's CPUs and GPUs (the default), or the search joins a running
cluster (`address`: "auto" or HOST:PORT), or uses the one the caller already started (`ray.init` before the
search); only what it started, it shuts down. The dashboard stays off unless asked for. The trials' processes
write their own logs (`log_to_driver=False`).

Resuming (`resume=RUN_DIR`) reads the folder's settings and trials.csv: the trials that ended count, their
results go to the searcher, and the search runs the trials still missing (a trial that was running is run
anew, under a new number; its row stays, marked interrupted). Ray's own saved state (pickles) is not read.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import yaml

from tphyolo.cores import available_cores
from tphyolo.data.dataset_config import BUILTIN_DATA
from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.errors import InputError
from tphyolo.flags import setting_name
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.distributed import DistContext
from tphyolo.runtime.run_dir import new_run_dir
from tphyolo.training.config import TrainConfig
from tphyolo.training.data import load_train_data_config
from tphyolo.training.hyp import hyp_path, load_hyp
from tphyolo.training.recipes import resolve_recipe
from tphyolo.training.state import with_resolved_paths
from tphyolo.training.tune.config import ASHA_REDUCTION, SEARCH_OWNED, TuneConfig
from tphyolo.training.tune.searchers import METRIC, build_searcher
from tphyolo.training.tune.space import build_search_space, load_space_overrides
from tphyolo.training.tune.trainable import TrialSetup, run_trial, trial_dirname
from tphyolo.training.tune.trials import (
    COUNTED,
    TrialRow,
    best_trial,
    final_table,
    history,
    plot_trials,
    read_trials,
    table_callback_class,
    write_best_hyp,
    write_trials,
)
from tphyolo.yaml_files import load_yaml_file

SETTINGS_FILE = "tune.yaml"
TRIALS_FILE = "trials.csv"
TUNE_EXTRA = 'pip install -e ".[tune]"'  # or pip install "tphyolo[tune]"
LOGGERS_WITH_HANDLERS = ("ray", "optuna")  # loggers that print on their own (propagate=False)


@dataclass(frozen=True)
class TuneResult:
    """A finished search: its folder, the fittest trial's whole hyp (None when no trial finished) and every
    trial's row (trials.csv), by trial number."""

    run_dir: Path
    best_hyp: dict[str, float] | None
    trials: list[TrialRow] = field(default_factory=list)

    def table(self, most: int = 10) -> str:
        """The `most` fittest trials as the command prints them."""

        return final_table(self.trials, most=most)


def _base_hyp(train: TrainConfig) -> tuple[TrainConfig, str, dict[str, float]]:
    """The training settings with the dataset's recipe filled in (a nominal batch left to it is left to each
    trial's fit) and paths made absolute (trials run in Ray's folders), the hyp file the search starts from, and
    its values."""
    train = with_resolved_paths(train, Path.cwd())
    if train.datasets_dir is not None or train.data in BUILTIN_DATA:  # built-in configs start from ./datasets
        train = replace(train, datasets_dir=str(Path(train.datasets_dir or "datasets").resolve()))
    data = load_train_data_config(train.data, DistContext(), datasets_dir=train.datasets_dir,
                                  scan_cache=train.scan_cache)  # fmt: skip
    resolved, _ = resolve_recipe(train, data)
    path = hyp_path(resolved.hyp)  # the nominal batch is left to each trial, which fits it to the data
    return replace(resolved, hyp=str(path.resolve()), nominal_batch=train.nominal_batch), str(path), load_hyp(path)


def _settings(run_dir: Path, tune: TuneConfig | None, train: TrainConfig | None) -> tuple[TuneConfig, TrainConfig]:
    """The settings of a resumed search (`tune` may change `trials` only), or those given, saved for later."""
    path = run_dir / SETTINGS_FILE
    if tune is not None and train is not None:
        write_text_atomic(path, yaml.safe_dump({"tune": tune.to_dict(), "train": train.to_dict()}, sort_keys=False))
        return tune, train
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: not a search folder (no {SETTINGS_FILE})")
    saved = load_yaml_file(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("tune"), dict) or not isinstance(saved.get("train"),
                                                                                               dict):  # fmt: skip
        raise InputError(f"{path}: expected the mappings 'tune' and 'train'")
    loaded = []
    for key, kind in (("tune", TuneConfig), ("train", TrainConfig)):
        values = {k: tuple(v) if isinstance(v, list) and kind is TrainConfig else v  # yaml lists
                  for k, v in saved[key].items()}  # fmt: skip
        try:
            loaded.append(kind.from_dict(values))
        except (TypeError, ValueError) as error:
            raise InputError(f"{path}: key {key!r} (the search's saved settings): {error}") from None
    resumed, train = loaded
    return (resumed if tune is None else replace(resumed, trials=tune.trials)), train


def require_ray_tune() -> None:
    """Raises ImportError in one line naming the extra when Ray Tune or Optuna cannot be imported."""
    try:
        import optuna  # noqa: F401
        import ray.tune  # noqa: F401
    except ImportError as error:
        raise ImportError(f"hyperparameter search needs Ray Tune and Optuna ({error}); install the extra: "
                          f"{TUNE_EXTRA}") from None  # fmt: skip


@contextlib.contextmanager
def ray_output_to(path: Path) -> Iterator[None]:
    """While inside, the loggers of LOGGERS_WITH_HANDLERS and the process's stdout and stderr write to the file
    `path` (appended to): everything Ray, Tune and Optuna print (Tune's status tables, warnings) goes there, so
    that the search's own lines stay readable."""
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
                yield
        finally:
            for name, handlers in saved.items():
                logging.getLogger(name).handlers[:] = handlers


@contextlib.contextmanager
def ray_cluster(*, address: str | None = None, dashboard: bool = False) -> Iterator[dict[str, float]]:
    """Ray, ready for a search (module docstring: started, joined or the caller's); yields the cluster's
    resources ({"CPU": 16.0, "GPU": 2.0, ...}). Raises ValueError when `address` is given while the process is
    already connected elsewhere."""
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


def _scheduler(tune: TuneConfig, epochs: int) -> Any:
    if tune.scheduler == "fifo":
        return None
    from ray.tune.schedulers import ASHAScheduler

    grace = min(tune.grace_epochs, epochs)
    return ASHAScheduler(time_attr="training_iteration", max_t=epochs, grace_period=grace,
                         reduction_factor=ASHA_REDUCTION)  # fmt: skip


def run_search(
    tune: TuneConfig | None,
    train: TrainConfig | None,
    runtime: RuntimeConfig,
    *,
    resume: str | Path | None = None,
    stream: TextIO | None = None,
    trainable: Callable[..., None] | None = None,
) -> TuneResult:
    """Run a search (module docstring): `tune` its settings, `train` its trials' (their hyp is the search's
    start), `runtime` how trials run. resume: the folder of a search to continue (then `tune` and `train` may
    be None; a given `tune` only changes the number of trials). stream: where the lines of ended trials go
    (default: stdout). trainable: what a trial runs (`trainable.run_trial`, called with `setup=TrialSetup`).
    Raises ImportError naming the extra to install when Ray Tune or Optuna is missing."""
    require_ray_tune()
    if resume is not None:
        run_dir = Path(resume).resolve()
        tune, train = _settings(run_dir, tune, None)
    elif tune is None or train is None:
        raise InputError("a new search needs its settings (tune and train)")
    else:
        run_dir = new_run_dir(tune.project, tune.name, exist_ok=tune.exist_ok).resolve()
        train = replace(train, val=True)
        _settings(run_dir, tune, train)
    train, base_file, base = _base_hyp(train)
    rows = []  # an earlier session's, a trial it left running marked interrupted
    if resume is not None and (run_dir / TRIALS_FILE).is_file():
        rows = [replace(row, state="interrupted") if row.state == "running" else row
                for row in read_trials(run_dir / TRIALS_FILE)]  # fmt: skip
    stream = stream or sys.stdout  # taken before Ray's output is sent to ray.log
    with ray_output_to(run_dir / "ray.log"):
        _fit(tune, train, runtime, run_dir=run_dir, base=base, rows=rows, stream=stream, trainable=trainable)
    return _finish(run_dir, base_file=base_file, stream=stream)


def _check_columns(path: Path, rows: list[TrialRow], keys: tuple[str, ...]) -> None:
    """ValueError naming trials.csv when its rows lack a column of a searched hyperparameter."""
    missing = [key for key in keys if rows and key not in rows[0].hyp]
    if missing:
        raise InputError(f"{path}: no column {missing[0]!r} of the searched hyperparameters ({len(missing)} missing)")


def _fit(tune: TuneConfig, train: TrainConfig, runtime: RuntimeConfig, *, run_dir: Path, base: dict[str, float],
         rows: list[TrialRow], stream: TextIO, trainable: Callable[..., None] | None) -> None:  # fmt: skip
    """The Ray Tune part: the trials still missing, run with the searcher, scheduler and table of trials. A trial
    process runs the next trial once its own has ended (Ray's `reuse_actors`): torch and the package are imported
    once per process, not once per trial."""
    from ray import tune as ray_tune

    overrides = load_space_overrides(tune.space) if tune.space else None
    try:
        space = build_search_space(base, overrides=overrides)
    except ValueError as error:  # only the space file's keys are checked: name it
        raise InputError(f"{tune.space}: {error}") from None
    _check_columns(run_dir / TRIALS_FILE, rows, space.keys)
    _check_cpus(tune)
    remaining = tune.trials - sum(row.state in COUNTED for row in rows)
    if remaining <= 0:
        return
    first = max((row.trial for row in rows), default=0) + 1
    searcher = build_searcher(tune.searcher, space, seed=train.seed, history=history(rows, space.keys),
                              first_trial=first)  # fmt: skip
    table = table_callback_class()(run_dir / TRIALS_FILE, space=space, epochs=train.epochs, total=tune.trials,
                                   stream=stream, rows=rows)  # fmt: skip
    with ray_cluster(address=tune.address, dashboard=tune.dashboard) as resources:
        cpus = resources.get("CPU", 0)
        if tune.cpus_per_trial > cpus:
            raise InputError(f"{setting_name(tune, 'cpus_per_trial')} {tune.cpus_per_trial:g}: the Ray cluster has "
                             f"{cpus:g} CPU(s)")  # fmt: skip
        gpus = tune.gpus_per_trial
        if gpus is None:
            gpus = 1.0 if resources.get("GPU", 0) > 0 and runtime.device != "cpu" else 0.0
        setup = TrialSetup(train, runtime, space, str(run_dir), gpu=gpus > 0)
        function = ray_tune.with_parameters(trainable or run_trial, setup=setup)
        sessions = run_dir / "ray"
        session = f"session{len(list(sessions.glob('session*'))) + 1}" if sessions.is_dir() else "session1"
        tuner = ray_tune.Tuner(
            ray_tune.with_resources(function, {"cpu": tune.cpus_per_trial, "gpu": gpus}),
            tune_config=ray_tune.TuneConfig(search_alg=searcher, scheduler=_scheduler(tune, train.epochs),
                                            num_samples=remaining, metric=METRIC, mode="max", reuse_actors=True,
                                            trial_dirname_creator=trial_dirname, trial_name_creator=trial_dirname),
            run_config=ray_tune.RunConfig(name=session, storage_path=str(sessions), verbose=0, log_to_file=True,
                                          callbacks=[table]),
        )  # fmt: skip
        try:
            tuner.fit()
        finally:
            table.interrupted()  # a trial still running when the search stops, for any reason


def _check_cpus(tune: TuneConfig) -> None:
    """ValueError naming the setting when a trial asks for more CPUs than this machine has (a local cluster)."""
    available = available_cores()
    if tune.address is None and tune.cpus_per_trial > available:
        raise InputError(f"{setting_name(tune, 'cpus_per_trial')} {tune.cpus_per_trial:g}: this machine has "
                         f"{available} CPU(s) for trials")  # fmt: skip


def _finish(run_dir: Path, *, base_file: str, stream: TextIO) -> TuneResult:
    """best_hyp.yaml, trials.png and the final table, from trials.csv."""
    rows = read_trials(run_dir / TRIALS_FILE) if (run_dir / TRIALS_FILE).is_file() else []
    write_trials(run_dir / TRIALS_FILE, rows)
    best = best_trial(rows)
    varied = [key for key in (rows[0].hyp if rows else {}) if len({row.hyp[key] for row in rows}) > 1]
    plot_trials(rows, varied, run_dir / "trials.png")  # a panel per hyperparameter the trials varied
    print(final_table(rows), file=stream)
    if best is None:
        print(f"no trial finished; see {run_dir / 'ray.log'}", file=stream)
        return TuneResult(run_dir, None, rows)
    write_best_hyp(run_dir / "best_hyp.yaml", best, base=base_file)
    print(f"best: trial {best.trial}, fitness {best.fitness:.4f}; hyp in {run_dir / 'best_hyp.yaml'}", file=stream)
    return TuneResult(run_dir, dict(best.hyp), rows)


def tune(*, resume: str | Path | None = None, device: str | None = None, runtime: RuntimeConfig | None = None,
         verbose: bool = True, **settings: Any) -> TuneResult:  # fmt: skip
    """Search hyperparameters as `tphyolo tune` does: keywords are TuneConfig fields (trials, searcher,
    scheduler, gpus_per_trial, ...) and TrainConfig fields (data, model, weights, imgsz, batch, epochs, hyp,
    ...); `device` (or a whole `runtime`) how trials run; `resume` a search folder to continue. Returns the
    best hyp and the table of trials (TuneResult). verbose=False prints nothing."""
    import io

    tune_fields = set(TuneConfig.__dataclass_fields__)
    train_fields = set(TrainConfig.__dataclass_fields__) - set(SEARCH_OWNED)
    unknown = sorted(set(settings) - tune_fields - train_fields)
    if unknown:
        raise TypeError(f"tune() got unknown settings {unknown}; it takes TuneConfig and TrainConfig fields")
    tune_cfg = TuneConfig(**{k: v for k, v in settings.items() if k in tune_fields})
    train_cfg = TrainConfig(**{k: v for k, v in settings.items() if k in train_fields})
    runtime = runtime or RuntimeConfig()
    if device is not None:
        runtime = replace(runtime, device=device)
    stream = None if verbose else io.StringIO()
    given = tune_cfg if resume is None or "trials" in settings else None
    return run_search(given, train_cfg if resume is None else None, runtime, resume=resume, stream=stream)

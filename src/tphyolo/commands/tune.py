"""`tphyolo tune`: search training hyperparameters on Ray Tune (`pip install -e ".[tune]"`).

The flags are the search's (`TuneConfig`) and the trials' training settings (`TrainConfig`, as `tphyolo train`
takes them, the run folder's aside), plus `--resume RUN_DIR` and the shared runtime flags (`--device cpu` keeps
trials off the GPUs).
"""

from __future__ import annotations

import argparse
from dataclasses import fields, replace

from tphyolo.errors import UsageError
from tphyolo.flags import add_flags, from_flags, setting_name
from tphyolo.training.config import TrainConfig
from tphyolo.training.tune.config import SEARCH_OWNED, TuneConfig, TuneResume

USES_RUNTIME = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, TuneConfig)
    add_flags(parser.add_argument_group("trials (as tphyolo train)"), TrainConfig, exclude=SEARCH_OWNED)
    add_flags(parser, TuneResume)


def run(args: argparse.Namespace) -> int:
    from tphyolo.training.tune.search import require_ray_tune, run_search  # lazy: imports torch; '-h' must not

    try:
        require_ray_tune()
    except ImportError as error:
        raise UsageError(str(error)) from None
    tune = from_flags(TuneConfig, args)
    untouched = TrainConfig()  # --project, --name, --exist-ok are the search's; the search sets its trials'
    train = replace(from_flags(TrainConfig, args), **{name: getattr(untouched, name) for name in SEARCH_OWNED})
    if args.resume is not None:
        changed = [
            setting_name(config, f.name)
            for config, default in ((tune, TuneConfig()), (train, untouched))
            for f in fields(config)
            if f.name != "trials" and getattr(config, f.name) != getattr(default, f.name)
        ]
        if changed:
            raise UsageError(f"--resume continues a search with its saved settings; drop {', '.join(changed)}")
        run_search(tune if tune.trials != TuneConfig().trials else None, None, args.runtime, resume=args.resume)
    else:
        run_search(tune, train, args.runtime)
    return 0

"""tphyolo: the TPH-YOLOv5 family for small-object detection in drone imagery, on PyTorch 2.x.

Importing this package changes no global state: process-wide settings are applied only by
`tphyolo.runtime.config.configure_process`, which the command-line entry points call.
"""

from tphyolo._version import __version__ as __version__


def __getattr__(name: str):
    """`tphyolo.Predictor`, `tphyolo.Results`, `tphyolo.Tracker`, `tphyolo.val`, `tphyolo.ValConfig`,
    `tphyolo.Trainer`, `tphyolo.train`, `tphyolo.TrainHook` and `tphyolo.tune` are imported on first use, so
    that `import tphyolo` stays light."""
    # the facade's imports are lazy on purpose: each loads torch, and `import tphyolo` (and `tphyolo -h`) must not
    if name == "Predictor":
        from tphyolo.predict.predictor import Predictor

        return Predictor
    if name == "Tracker":
        from tphyolo.track.stream import Tracker

        return Tracker
    if name == "Results":
        from tphyolo.predict.results import Results

        return Results
    if name == "val":
        from tphyolo.evaluation.val import val

        return val
    if name == "ValConfig":
        from tphyolo.evaluation.settings import ValConfig

        return ValConfig
    if name in ("Trainer", "train", "TrainConfig", "TrainHook"):
        from tphyolo.training import config as train_config
        from tphyolo.training import trainer

        return getattr(trainer, name, None) or getattr(train_config, name)
    if name == "tune":
        from tphyolo.training.tune.search import tune

        return tune
    raise AttributeError(f"module 'tphyolo' has no attribute {name!r}")

"""Training: the `Trainer` and its builders (config, data, model, optimisation), the loop, loss, hyperparameters
and recipes, resumable state, logs and plots, the hooks a run calls (`training.hooks`); the crop classifier's
training (`train.classifier`).

Importing this package imports none of its modules; the public names below are imported from their modules on
first use (`from tphyolo.training import Trainer, TrainHook`).
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.training.config": ("TrainConfig",),
        "tphyolo.training.hooks.base": ("TrainHook",),
        "tphyolo.training.hooks.builtin": ("EarlyStopping", "PlotResults"),
        "tphyolo.training.hooks.mlflow_logger": ("MLflowLogger",),
        "tphyolo.training.trainer": ("Trainer", "TrainResult", "train"),
    },
)

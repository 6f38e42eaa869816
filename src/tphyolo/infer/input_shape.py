"""The input a set of backends takes: any stride multiple, or the one shape of fixed-size exports.

A fixed-size export (exported without `--dynamic`) runs one image size and at most its own batch. Whoever
feeds it letterboxes every image to that size, padding the whole way (no minimum rectangle), as YOLOv5 does for
fixed-shape backends; prediction and validation then just work on images of any shape. What cannot work is
refused before any image is read: fixed-size exports of different sizes in one ensemble, and a batch larger
than a file's that the caller asked for.

What the caller left to the models (`InferenceConfig.from_model`, a command line without `--img` or `--batch`)
is settled by the models once they are loaded (`settled_config`), as ultralytics does: the image size becomes
the one the models were made for (a checkpoint's training size, an export's own), and the batch at most a
fixed-batch export's. Each choice is said in one line (`tphyolo.infer.input_shape` logger, INFO), before any
image is read.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tphyolo.errors import InputError
from tphyolo.flags import setting_name
from tphyolo.infer.backends.pytorch import Backend, largest_own_imgsz
from tphyolo.infer.config import InferenceConfig

LOGGER = logging.getLogger(__name__)


def fixed_input_shape(backends: Sequence[Backend], config: InferenceConfig) -> tuple[int, int] | None:
    """The (h, w) every input of `backends` must have, or None when they all take any stride multiple.
    Raises ValueError when two fixed-size exports disagree on their size, or when `config.batch` is larger
    than a fixed-size export's batch."""
    fixed = [b for b in backends if getattr(b, "fixed_shape", None) is not None]  # optional: absent means any
    shapes = sorted({tuple(b.fixed_shape) for b in fixed})
    if len(shapes) > 1:
        raise InputError(f"fixed-size exports of different input sizes {shapes} cannot run together; "
                         "export them at one size or with --dynamic")  # fmt: skip
    for backend in fixed:
        if getattr(backend, "max_batch", None) is not None and config.batch > backend.max_batch:
            name = getattr(backend, "path", type(backend).__name__)
            raise InputError(
                f"{name}: exported for batch {backend.max_batch}, but {setting_name(config, 'batch')} is "
                f"{config.batch}; give {setting_name(config, 'batch')} {backend.max_batch} or export with --dynamic"
            )
    return shapes[0] if shapes else None


def settled_config(backends: Sequence[Backend], config: InferenceConfig) -> InferenceConfig:
    """`config` with the settings of `config.from_model` chosen by `backends` (and `from_model` emptied), each
    choice logged in one line: `imgsz` the largest `own_imgsz` of the backends (config's when none has one),
    `batch` the smallest `max_batch` of a fixed-batch export when it is below config's."""
    chosen: dict[str, int] = {}
    if "imgsz" in config.from_model and (found := largest_own_imgsz(backends)) is not None:
        size, backend = found
        how = getattr(backend, "imgsz_origin", "trained")  # an export's own size, or a checkpoint's
        chosen["imgsz"] = size
        LOGGER.info("%s %d: the image size %s was %s at (%s overrides)", setting_name(config, "imgsz"),
                    size, _name(backend), how, setting_name(config, "imgsz"))  # fmt: skip
    if "batch" in config.from_model:
        limits = [(limit, b) for b in backends if (limit := getattr(b, "max_batch", None)) is not None]
        if limits and (limit := min(limits, key=lambda pair: pair[0]))[0] < config.batch:
            batch, backend = limit
            chosen["batch"] = batch
            LOGGER.info("%s %d: %s is exported for batch %d (a larger %s needs an export with --dynamic)",
                        setting_name(config, "batch"), batch, _name(backend), batch,
                        setting_name(config, "batch"))  # fmt: skip
    return replace(config, **chosen, from_model=())


def _name(backend: Backend) -> str:
    path = getattr(backend, "path", None)  # optional: a model given in memory has none
    return Path(path).name if path is not None else type(backend).__name__

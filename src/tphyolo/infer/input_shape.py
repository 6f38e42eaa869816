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

Slicing left to the models (`SliceConfig(MODEL)`, the commands' default without `--slice`) is settled likewise
(`settled_slicing`): a checkpoint trained on tiles runs sliced with windows of its tile size and the merge it was
validated with, in one line that says so; other models run whole images.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.errors import InputError
from tphyolo.flags import setting_name
from tphyolo.infer.backends.base import Backend
from tphyolo.infer.backends.pytorch import largest_own_imgsz
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import MODEL, SliceConfig

LOGGER = logging.getLogger(__name__)


def fixed_input_shape(backends: Sequence[Backend], config: InferenceConfig) -> tuple[int, int] | None:
    """The (h, w) every input of `backends` must have, or None when they all take any stride multiple.
    Raises ValueError when two fixed-size exports disagree on their size, or when `config.batch` is larger
    than a fixed-size export's batch."""
    fixed = [b for b in backends if b.fixed_shape is not None]
    shapes = sorted({tuple(b.fixed_shape) for b in fixed})
    if len(shapes) > 1:
        raise InputError(f"fixed-size exports of different input sizes {shapes} cannot run together; "
                         "export them at one size or with --dynamic")  # fmt: skip
    for backend in fixed:
        if backend.max_batch is not None and config.batch > backend.max_batch:
            name = _name(backend)
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
        how = backend.imgsz_origin  # an export's own size, or a checkpoint's
        chosen["imgsz"] = size
        LOGGER.info("%s %d: the image size %s was %s at (%s overrides)", setting_name(config, "imgsz"),
                    size, _name(backend), how, setting_name(config, "imgsz"))  # fmt: skip
    if "batch" in config.from_model:
        limits = [(limit, b) for b in backends if (limit := b.max_batch) is not None]
        if limits and (limit := min(limits, key=lambda pair: pair[0]))[0] < config.batch:
            batch, backend = limit
            chosen["batch"] = batch
            LOGGER.info("%s %d: %s is exported for batch %d (a larger %s needs an export with --dynamic)",
                        setting_name(config, "batch"), batch, _name(backend), batch,
                        setting_name(config, "batch"))  # fmt: skip
    return replace(config, **chosen, from_model=())


def _name(backend: Backend) -> str:
    path = backend.path  # None for a model given in memory
    return Path(path).name if path is not None else type(backend).__name__


@lru_cache(maxsize=16)
def _trained_tiles(path: str, mtime: float) -> tuple[int, str] | None:
    """(tile size, merge) of a checkpoint trained on tiles (its train_args), None for any other file."""
    args = load_checkpoint(path).state.get("train_args") if path.endswith(".pt") else None
    if not isinstance(args, dict) or not args.get("tile") or type(args.get("imgsz")) is not int:
        return None
    return args["imgsz"], str(args.get("merge", InferenceConfig.merge))


def trained_tiles(backends: Sequence[Backend]) -> tuple[int, str, Backend] | None:
    """The tile size and merge of the first of `backends` read from a checkpoint trained on tiles, and it."""
    for backend in backends:
        path = backend.path  # None for a model given in memory
        if path is not None and Path(path).is_file():
            found = _trained_tiles(str(path), Path(path).stat().st_mtime)
            if found is not None:
                return *found, backend
    return None


def settled_slicing(
    backends: Sequence[Backend], config: InferenceConfig, slicing: SliceConfig | None
) -> tuple[InferenceConfig, SliceConfig | None]:
    """`config` and `slicing` with a slicing left to the models (`SliceConfig(MODEL)`) settled: windows of the
    tile size of a checkpoint trained on tiles (`trained_tiles`), merged by its merge unless `config` names another
    than the default, said in one line; no slicing for other models. Other slicings come back as they are."""
    if slicing is None or slicing.size != MODEL:
        return config, slicing
    found = trained_tiles(backends)
    if found is None:
        return config, None
    size, merge, backend = found
    if config.merge == InferenceConfig.merge:
        config = replace(config, merge=merge)
    LOGGER.info("--slice %d: %s was trained on %d px tiles and validated sliced (--merge %s); --slice 0 runs whole "
                "images", size, _name(backend), size, config.merge)  # fmt: skip
    return config, replace(slicing, size=size)

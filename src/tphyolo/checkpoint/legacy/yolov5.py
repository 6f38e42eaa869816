"""Original TPH-YOLOv5 / YOLOv5 training checkpoints, read as data.

Those files are pickled dicts `{'epoch', 'best_fitness', 'model', 'ema', 'updates', 'optimizer', 'wandb_id',
'date', ...}` whose `model` and `ema` are whole `models.yolo.Model` objects (usually float16).
`read_yolov5_checkpoint` unpickles one with the restricted unpickler and recovers what the model is: its
yaml dict, its weights under the original key names (`model.0.conv.weight`, ...), class names and count.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tphyolo.checkpoint.legacy.errors import LegacyCheckpointError
from tphyolo.checkpoint.legacy.numpy_records import NumpyArray
from tphyolo.checkpoint.legacy.unpickler import LegacyObject, read_archive

# Class names of the top-level model object across the original projects' releases.
_MODEL_CLASSES = ("Model", "DetectionModel")


@dataclass(frozen=True)
class YOLOv5Checkpoint:
    """What an original checkpoint holds, as plain data.

    model_yaml: the dict the original model was built from (`nc`, multiples, `anchors`, `backbone`, `head`).
    state_dict: the chosen weights under the original key names, in the original module order, in the stored
        dtype (usually float16); non-persistent buffers are left out, as `nn.Module.state_dict` does.
    weights: "ema" when the EMA weights were present and chosen (as the original loader does), else "model".
    names: class names, index = class id.
    epoch, best_fitness, date: the original training metadata (None when absent).
    """

    path: Path
    model_yaml: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    weights: str
    names: list[str]
    epoch: int | None
    best_fitness: float | None
    date: str | None

    @property
    def nc(self) -> int:
        return len(self.names)


def _record_dict(obj: LegacyObject, attribute: str, source: str) -> dict[str, Any]:
    value = obj.__dict__.get(attribute, {})
    if not isinstance(value, dict):
        raise LegacyCheckpointError(f"{source}: {obj.legacy_class}.{attribute} is not a dict")
    return value


def iter_state(
    module: LegacyObject, prefix: str = "", *, source: str, _ancestors: tuple[int, ...] = ()
) -> Iterator[tuple[str, torch.Tensor]]:
    """(key, tensor) pairs of a pickled module record in `nn.Module.state_dict` order.

    Per module: its parameters, then its persistent buffers, then each child, recursively; None entries
    are skipped.
    """
    if id(module) in _ancestors:
        raise LegacyCheckpointError(f"{source}: module {prefix.rstrip('.')} contains itself")
    non_persistent = module.__dict__.get("_non_persistent_buffers_set", set())
    own = list(_record_dict(module, "_parameters", source).items())
    own += [(k, v) for k, v in _record_dict(module, "_buffers", source).items() if k not in non_persistent]
    for name, tensor in own:
        if tensor is None:
            continue
        if not isinstance(tensor, torch.Tensor):
            raise LegacyCheckpointError(f"{source}: {prefix}{name} is a {type(tensor).__name__}, not a tensor")
        yield prefix + name, tensor
    for name, child in _record_dict(module, "_modules", source).items():
        if child is None:
            continue
        if not isinstance(child, LegacyObject):
            raise LegacyCheckpointError(f"{source}: submodule {prefix}{name} is a {type(child).__name__}")
        yield from iter_state(child, f"{prefix}{name}.", source=source, _ancestors=(*_ancestors, id(module)))


def _class_names(names: Any, nc: int, source: str) -> list[str]:
    if isinstance(names, dict):  # later YOLOv5 releases: {class id: name}
        names = [names[i] for i in sorted(names)]
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise LegacyCheckpointError(f"{source}: model.names must be a list of strings, got {names!r:.120}")
    if len(names) != nc:
        raise LegacyCheckpointError(f"{source}: model has nc={nc} but {len(names)} class names")
    return list(names)


def _as_float(value: Any, source: str) -> float | None:
    """best_fitness is a float, a numpy scalar or a 1-element array depending on the release."""
    if value is None:
        return None
    if isinstance(value, NumpyArray):
        value = value.array
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise LegacyCheckpointError(f"{source}: best_fitness is not a number: {value!r:.80}") from error
    if array.size != 1:
        raise LegacyCheckpointError(f"{source}: best_fitness should be one number, got shape {array.shape}")
    return float(array.reshape(()))


def read_yolov5_checkpoint(path: str | Path) -> YOLOv5Checkpoint:
    """Reads an original TPH-YOLOv5/YOLOv5 checkpoint without running any code from it.

    Chooses the EMA weights when `ema` is present and not None, else `model` (the original loader's rule).
    Raises `ForbiddenGlobalError`/`LegacyCheckpointError` (ValueErrors naming the file) for anything else.
    """
    path = Path(path)
    source = str(path)
    root = read_archive(path)
    if not isinstance(root, dict) or "model" not in root:
        keys = sorted(map(str, root)) if isinstance(root, dict) else type(root).__name__
        raise LegacyCheckpointError(f"{source}: not a YOLOv5-style checkpoint (expected a dict with 'model'): {keys}")
    weights = "ema" if root.get("ema") is not None else "model"
    model = root[weights]
    if not isinstance(model, LegacyObject) or model.legacy_class.rsplit(".", 1)[-1] not in _MODEL_CLASSES:
        found = model.legacy_class if isinstance(model, LegacyObject) else type(model).__name__
        raise LegacyCheckpointError(f"{source}: checkpoint[{weights!r}] is {found}, expected a YOLOv5 Model")
    model_yaml = model.__dict__.get("yaml")
    if not isinstance(model_yaml, dict) or "nc" not in model_yaml:
        raise LegacyCheckpointError(f"{source}: the pickled model has no yaml dict with 'nc'")
    try:
        state_dict = dict(iter_state(model, source=source))
    except RecursionError:
        raise LegacyCheckpointError(f"{source}: module tree nested too deeply") from None
    epoch = root.get("epoch")
    date = root.get("date")
    return YOLOv5Checkpoint(
        path=path,
        model_yaml=model_yaml,
        state_dict=state_dict,
        weights=weights,
        names=_class_names(model.__dict__.get("names"), int(model_yaml["nc"]), source),
        epoch=epoch if type(epoch) is int else None,
        best_fitness=_as_float(root.get("best_fitness"), source),
        date=date if isinstance(date, str) else None,
    )

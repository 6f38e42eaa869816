"""build_model: a DetectionModel from a built-in name, a yaml file, yaml text or a dict.

Built-in names are a family and a scale letter, e.g. `yolov5s`, `tph-yolov5l`, `tph-yolov5-swinm`,
`tph-yolov5ppx`. Each family is one yaml file under `tphyolo/configs/models`; the scale sets
depth_multiple and width_multiple from `SCALES`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from tphyolo.errors import InputError
from tphyolo.models.model import DetectionModel
from tphyolo.yaml_files import load_yaml_file, load_yaml_text

SCALES: dict[str, tuple[float, float]] = {  # scale -> (depth_multiple, width_multiple)
    "n": (0.33, 0.25),
    "s": (0.33, 0.50),
    "m": (0.67, 0.75),
    "l": (1.00, 1.00),
    "x": (1.33, 1.25),
}
FAMILIES: dict[str, tuple[str, str]] = {  # family -> (yaml file, scales offered)
    "yolov5": ("yolov5.yaml", "nsmlx"),
    "tph-yolov5": ("tph-yolov5.yaml", "nsmlx"),
    "tph-yolov5-swin": ("tph-yolov5-swin.yaml", "smlx"),  # n is too narrow for 32-channel Swin heads
    "tph-yolov5pp": ("tph-yolov5pp.yaml", "nsmlx"),
}


def builtin_model_names() -> list[str]:
    """All built-in model names, e.g. ['tph-yolov5l', ...]."""
    return sorted(f"{family}{scale}" for family, (_, scales) in FAMILIES.items() for scale in scales)


def load_model_config(cfg: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """The model yaml as a dict, from a built-in name, a yaml path, yaml text or a mapping (copied)."""
    if isinstance(cfg, Mapping):
        return copy.deepcopy(dict(cfg))
    text = str(cfg)
    if isinstance(cfg, str) and text in builtin_model_names():
        family, scale = text[:-1], text[-1]
        file_name = FAMILIES[family][0]
        loaded = _parse_yaml(resources.files("tphyolo").joinpath("configs", "models", file_name).read_text(), text)
        loaded["depth_multiple"], loaded["width_multiple"] = SCALES[scale]
        return loaded
    if isinstance(cfg, Path) or text.endswith((".yaml", ".yml")) and "\n" not in text:
        path = Path(cfg)
        if not path.is_file():
            raise FileNotFoundError(f"model yaml {path} does not exist")
        return _as_mapping(load_yaml_file(path), str(path))
    if "\n" in text or ":" in text:
        return _parse_yaml(text, "model yaml text")
    raise InputError(f"unknown model {text!r}: not a yaml file, yaml text or built-in ({builtin_model_names()})")


def build_model(
    cfg: str | Path | Mapping[str, Any],
    *,
    num_classes: int | None = None,
    names: Sequence[str] | None = None,
    in_channels: int | None = None,
    origin: str | None = None,
) -> DetectionModel:
    """Builds a freshly initialised model; `num_classes` overrides the yaml's nc, `names` sets class names.

    A model yaml the parser refuses (a layer above a size limit, an unknown module, ...) raises ValueError
    naming where the yaml came from: its file, the built-in name, "model yaml text", or `origin` (e.g. the
    checkpoint that embeds it; a mapping given without `origin` is not named)."""
    if names is not None and num_classes is None:
        num_classes = len(names)
    config = load_model_config(cfg)
    origin = origin or _origin(cfg)
    try:
        return DetectionModel(config, num_classes=num_classes, names=names, in_channels=in_channels)
    except ValueError as error:
        if origin is None:
            raise
        raise InputError(f"{origin}: {error}") from error


def _origin(cfg: str | Path | Mapping[str, Any]) -> str | None:
    """How errors name the model yaml `cfg` (as `load_model_config` reads it); None for a mapping."""
    if isinstance(cfg, Mapping):
        return None
    text = str(cfg)
    if isinstance(cfg, str) and text in builtin_model_names():
        return f"built-in model {text}"
    if isinstance(cfg, Path) or text.endswith((".yaml", ".yml")) and "\n" not in text:
        return text
    return "model yaml text"


def _parse_yaml(text: str, origin: str) -> dict[str, Any]:
    return _as_mapping(load_yaml_text(text, origin), origin)


def _as_mapping(loaded: Any, origin: str) -> dict[str, Any]:
    if not isinstance(loaded, dict):
        raise InputError(f"{origin}: a model yaml must be a mapping, got {type(loaded).__name__}")
    return loaded

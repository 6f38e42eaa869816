"""Training hyperparameters: loading and validating hyp yamls, and their train-time scaling to a model.

A hyp file is a flat yaml mapping of the YOLOv5 hyperparameter names (`HYP_KEYS`) to numbers. Built-in files
live in `tphyolo/configs/hyps/hyp.<name>.yaml` and load by name (`load_hyp("visdrone")`).

`copy_paste` is accepted and validated, for compatibility with the original's hyp files, but has no effect:
YOLOv5 v6.0 pastes instance *segments* (polygons) and does nothing for box-only labels, which is all this
package trains on. Pasting boxes instead would change what those files mean (scratch-high asks for 0.1), so a
run whose hyp sets it above 0 says once that it is ignored (`train_hyp`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path

from tphyolo.errors import InputError
from tphyolo.yaml_files import load_yaml_file

LOGGER = logging.getLogger("tphyolo.train")
HYP_DIR = Path(__file__).resolve().parents[1] / "configs" / "hyps"

# name -> what it sets. Every hyp file sets all of these.
HYP_KEYS: dict[str, str] = {
    "lr0": "initial learning rate",
    "lrf": "final learning rate as a fraction of lr0",
    "momentum": "SGD momentum / Adam beta1",
    "weight_decay": "optimizer weight decay",
    "warmup_epochs": "warmup length in epochs (fractions allowed)",
    "warmup_momentum": "momentum at the start of warmup",
    "warmup_bias_lr": "bias learning rate at the start of warmup",
    "box": "box (CIoU) loss gain",
    "cls": "classification loss gain",
    "cls_pw": "classification BCE positive weight",
    "obj": "objectness loss gain",
    "obj_pw": "objectness BCE positive weight",
    "iou_t": "IoU training threshold (unused by the anchor-ratio assignment)",
    "anchor_t": "largest target/anchor side ratio for a match",
    "fl_gamma": "focal loss gamma (0 = plain BCE)",
    "hsv_h": "HSV hue augmentation (fraction)",
    "hsv_s": "HSV saturation augmentation (fraction)",
    "hsv_v": "HSV value augmentation (fraction)",
    "degrees": "rotation (+/- degrees)",
    "translate": "translation (+/- fraction)",
    "scale": "scale (+/- gain)",
    "shear": "shear (+/- degrees)",
    "perspective": "perspective (+/- fraction)",
    "flipud": "vertical flip probability",
    "fliplr": "horizontal flip probability",
    "mosaic": "mosaic probability",
    "mixup": "mixup probability",
}
# Keys a file may add.
OPTIONAL_HYP_KEYS: dict[str, str] = {
    "label_smoothing": "class label smoothing epsilon",
    "anchors": "anchors per output level, to fit by autoanchor instead of the model's",
}
# Keys of the original's files that are accepted and validated but change nothing here (module docstring).
NO_EFFECT_HYP_KEYS: dict[str, str] = {
    "copy_paste": "segment copy-paste probability (segments only: no effect on box labels)",
}
PROBABILITY_KEYS = ("flipud", "fliplr", "mosaic", "mixup", "copy_paste", "label_smoothing")


def builtin_hyps() -> list[str]:
    """Names of the built-in hyp files (`hyp.<name>.yaml` in the package)."""
    return sorted(p.name[len("hyp.") : -len(".yaml")] for p in HYP_DIR.glob("hyp.*.yaml"))


def hyp_path(path_or_name: str | Path) -> Path:
    """The file behind a built-in name ("visdrone") or a path; FileNotFoundError lists the built-in names."""
    path = Path(path_or_name)
    if path.is_file():
        return path
    builtin = HYP_DIR / f"hyp.{path_or_name}.yaml"
    if isinstance(path_or_name, str) and "/" not in path_or_name and builtin.is_file():
        return builtin
    raise FileNotFoundError(
        f"hyp {str(path_or_name)!r} is neither a file nor a built-in name; built-in: {builtin_hyps()}"
    )


def load_hyp(path_or_name: str | Path) -> dict[str, float]:
    """Read and validate a hyp yaml (a path or a built-in name). Returns a new dict of numbers."""
    path = hyp_path(path_or_name)
    data = load_yaml_file(path)
    return validate_hyp(data, source=str(path))


def validate_hyp(hyp: object, *, source: str = "hyp") -> dict[str, float]:
    """Check that `hyp` is a mapping with every key of HYP_KEYS, nothing unknown, and sane numbers.

    Returns a plain dict copy (ints stay ints). Raises ValueError naming `source` and the offending key.
    """
    if not isinstance(hyp, Mapping):
        raise InputError(f"{source}: a hyp file must be a mapping of names to numbers, got {type(hyp).__name__}")
    missing = [k for k in HYP_KEYS if k not in hyp]
    if missing:
        raise InputError(f"{source}: missing hyperparameter(s) {missing}")
    known = {**HYP_KEYS, **OPTIONAL_HYP_KEYS, **NO_EFFECT_HYP_KEYS}
    unknown = [k for k in hyp if k not in known]
    if unknown:
        known = sorted(known)
        raise InputError(f"{source}: unknown hyperparameter(s) {unknown}; known: {known}")
    for key, value in hyp.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(f"{source}: {key} must be a finite number, got {value!r}")
        if value < 0:
            raise InputError(f"{source}: {key} must be >= 0, got {value!r}")
    for key in PROBABILITY_KEYS:
        if hyp.get(key, 0) > 1:
            raise InputError(f"{source}: {key} is a probability/fraction and must be <= 1, got {hyp[key]!r}")
    if hyp["anchor_t"] <= 1:
        raise InputError(f"{source}: anchor_t must be > 1 (a side ratio), got {hyp['anchor_t']!r}")
    if hyp["lr0"] <= 0:
        raise InputError(f"{source}: lr0 must be > 0, got {hyp['lr0']!r}")
    anchors = hyp.get("anchors")
    if anchors is not None and (anchors != int(anchors) or anchors < 1):
        raise InputError(f"{source}: anchors is a count per level and must be a positive integer, got {anchors!r}")
    return dict(hyp)


def train_hyp(path_or_name: str | Path, *, label_smoothing: float | None = None) -> dict[str, float]:
    """The hyperparameters of a training run: the file's (`load_hyp`), with `label_smoothing` replacing the
    file's value when it is not None (0 included). Logs a warning when the file sets a key of
    NO_EFFECT_HYP_KEYS above 0, since the run ignores it."""
    hyp = load_hyp(path_or_name)
    if label_smoothing is not None:
        hyp["label_smoothing"] = label_smoothing
    for key, meaning in NO_EFFECT_HYP_KEYS.items():
        if hyp.get(key, 0) > 0:
            LOGGER.warning("hyp %s: %s=%s is ignored: %s", path_or_name, key, hyp[key], meaning)
    return hyp


def scale_hyp(
    hyp: Mapping[str, float],
    *,
    num_levels: int,
    num_classes: int,
    imgsz: int,
    label_smoothing: float | None = None,
) -> dict[str, float]:
    """The loss gains adapted to a model and training size, as a new dict.

    The gains are tuned for 3 levels, 80 classes and 640 px: box *= 3/nl, cls *= nc/80 * 3/nl,
    obj *= (imgsz/640)^2 * 3/nl. label_smoothing is set to the argument, or kept from `hyp` (default 0).
    """
    if num_levels < 1 or num_classes < 1 or imgsz < 1:
        raise InputError(f"num_levels, num_classes and imgsz must be >= 1, got {num_levels}, {num_classes}, {imgsz}")
    scaled = dict(hyp)
    scaled["box"] = hyp["box"] * (3 / num_levels)
    scaled["cls"] = hyp["cls"] * (num_classes / 80 * 3 / num_levels)
    scaled["obj"] = hyp["obj"] * ((imgsz / 640) ** 2 * 3 / num_levels)
    scaled["label_smoothing"] = float(hyp.get("label_smoothing", 0.0) if label_smoothing is None else label_smoothing)
    return scaled

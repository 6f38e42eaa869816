"""Whether a model's classes are a dataset's, checked the same way for every kind of `--data`.

A dataset names its classes in its yaml (`names:`), or through the label format of its files (a bare VisDrone
folder has VisDrone's ten), or not at all (a bare YOLO folder numbers them from its labels). Named classes must
be as many as the model's; numbered ones must be ids the model has. Both checks come before any inference, so
that a mismatch is one line and not an IndexError after a whole evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence

from tphyolo.data.dataset_config import DataConfig
from tphyolo.data.scan import SplitScan, format_class_names
from tphyolo.errors import InputError


def check_data_classes(
    model_names: Sequence[str], data: DataConfig, split: str, *, model: object, data_name: object
) -> tuple[str, ...]:
    """The class names of `split` of `data` -- its yaml's, else those its label format defines, else () (the
    labels number them) -- found before any image or label is read. Raises ValueError naming `model` and
    `data_name` with both class counts when the names are not as many as `model_names`."""
    names, source = tuple(data.names), "in its yaml"
    if not names:
        names, source = format_class_names(data.split(split)), "by its label format"
    if names and len(names) != len(model_names):
        raise InputError(
            f"{model}: the model has {len(model_names)} classes, but {data_name} has {len(names)} (named "
            f"{source}: {_shown(names)}); give data of the model's classes"
        )
    return names


def check_label_ids(scan: SplitScan, num_classes: int, *, model: object, data_name: object) -> None:
    """Raises ValueError naming `model` and `data_name` when a label of `scan` has a class id the model, of
    `num_classes` classes, does not have."""
    top = max((int(r.labels.classes.max()) for r in scan.records if len(r.labels.classes)), default=-1)
    if top >= num_classes:
        raise InputError(
            f"{model}: the model has {num_classes} classes (ids 0..{num_classes - 1}), but the labels of "
            f"{data_name} use class id {top}; give data of the model's classes"
        )


def _shown(names: Sequence[str], most: int = 4) -> str:
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")

"""Which classes a crop classifier covers, and the records of a dataset split to cut its crops from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tphyolo.data.dataset_config import DataConfig
from tphyolo.data.scan import Record, scan_split
from tphyolo.errors import InputError
from tphyolo.yaml_files import load_yaml_file

CONFUSABLE_KEY = "confusable"


def confusable_classes(data: DataConfig) -> tuple[str, ...]:
    """The class names listed under `confusable:` in the dataset yaml (names or ids), or () when it has none."""
    if data.source is None:
        return ()
    raw = load_yaml_file(data.source) or {}
    listed = raw.get(CONFUSABLE_KEY) if isinstance(raw, dict) else None
    if listed is None:
        return ()
    if not isinstance(listed, list) or not all(isinstance(v, (str, int)) for v in listed):
        raise InputError(f"{data.source}: '{CONFUSABLE_KEY}' must be a list of class names or ids, got {listed!r}")
    names = []
    for value in listed:
        if isinstance(value, int):
            if not 0 <= value < data.nc:
                raise InputError(f"{data.source}: '{CONFUSABLE_KEY}' id {value} outside 0..{data.nc - 1}")
            value = data.names[value]
        names.append(value)
    return tuple(names)


@dataclass(frozen=True)
class SplitRecords:
    """The scanned records of a split and the dataset's class names."""

    records: list[Record]
    names: tuple[str, ...]
    problems: int


def scan_records(data: DataConfig, split: str) -> SplitRecords:
    """Scan `split` of `data` (any label format `scan_split` reads); ValueError when it has no sources."""
    sources = data.split(split)
    if not sources:
        where = data.source or data.root
        raise InputError(f"{where}: the dataset has no '{split}' split")
    scan = scan_split(sources, names=data.names)
    return SplitRecords(scan.records, scan.names, len(scan.report.problems))


def select_classes(
    names: Sequence[str], requested: Sequence[str] | None, confusable: Sequence[str] = ()
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(class names, their ids in `names`) the classifier covers: `requested`, else `confusable`, else all.
    Raises ValueError for an unknown or repeated name, or fewer than two classes."""
    chosen = tuple(requested or confusable or names)
    unknown = [n for n in chosen if n not in names]
    if unknown:
        raise InputError(f"classes {unknown} are not in the dataset's classes {list(names)}")
    if len(set(chosen)) != len(chosen):
        raise InputError(f"classes {list(chosen)} name a class twice")
    if len(chosen) < 2:
        raise InputError(f"a classifier needs at least two classes, got {list(chosen)}")
    return chosen, tuple(list(names).index(n) for n in chosen)

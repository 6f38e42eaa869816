"""The category table of a data set: the category number its files write for each class.

Files in VisDrone's format (and VisDrone-MOT, MOTChallenge, UAVDT rows) carry a category number per object, a
model a class index. A `CategoryTable` maps one to the other for one data set, and every reader and writer of
those files goes through it: the label scan, `tphyolo predict --save-visdrone`, the track writers, `tphyolo
eval`, `tphyolo track` and `tphyolo analyze`.

Which table a data set has (`table_for`):

- an explicit `categories:` mapping in its yaml, category number -> class index or class name
  (`categories: {4: car, 9: bus}`): exactly those numbers;
- otherwise category = class index + 1 in the order of `names` (VisDrone-DET's own table when the names are
  VisDrone's ten: `VISDRONE`).

A folder of files written by tphyolo's track writers says its table in `categories.yaml` (`TABLE_FILE`:
`categories: {1: car, ...}`; `write_table`, `read_table`), so that what reads the files back (`tphyolo analyze
--tracks`) numbers them as they were written.

Benchmarks with their own numbering have their own tables: `VISDRONE` (1 pedestrian ... 10 motor), `UAVDT`
(1 car, 2 truck, 3 bus), `MOT` (MOTChallenge's 1 pedestrian ... 13 crowd). Category 0 is VisDrone's ignored
region and never a class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.data.mot.motchallenge import CLASSES as MOT_CLASSES
from tphyolo.data.mot.uavdt import CLASSES as UAVDT_CLASSES
from tphyolo.errors import InputError
from tphyolo.yaml_files import load_yaml_file

NONE = -1  # no class, or no category
TABLE_FILE = "categories.yaml"


@dataclass(frozen=True)
class CategoryTable:
    """`names[i]` is class i's name and `ids[i]` its category number (unique, >= 1)."""

    names: tuple[str, ...]
    ids: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.ids) or len(set(self.ids)) != len(self.ids) or min(self.ids, default=1) < 1:
            raise InputError(f"a category table needs one unique category >= 1 per class, got {self.ids}")

    @classmethod
    def numbered(cls, names: Sequence[str]) -> CategoryTable:
        """Category = class index + 1: how a data set without a `categories:` mapping numbers its files."""
        return cls(tuple(names), tuple(range(1, len(names) + 1)))

    @classmethod
    def of_mapping(cls, mapping: Mapping[int, str]) -> CategoryTable:
        """The table of {category: name}, classes in the order of the categories."""
        ordered = sorted(mapping.items())
        return cls(tuple(name for _, name in ordered), tuple(category for category, _ in ordered))

    @property
    def is_numbered(self) -> bool:
        """Whether category = class index + 1 (the files need no mapping)."""
        return self.ids == tuple(range(1, len(self.ids) + 1))

    def categories(self, labels) -> np.ndarray:
        """The category number of each class index in `labels` (NONE for NONE or an index outside the table)."""
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        table = np.array([*self.ids, NONE], dtype=np.int64)
        return table[np.where((labels >= 0) & (labels < len(self.ids)), labels, len(self.ids))]

    def classes(self, categories) -> np.ndarray:
        """The class index of each category number in `categories` (NONE for a number not in the table)."""
        class_of = dict(zip(self.ids, range(len(self.ids)), strict=True))
        values = np.asarray(categories).reshape(-1).tolist()
        return np.array([class_of.get(int(c), NONE) if c == int(c) else NONE for c in values], dtype=np.int64)

    def ids_of(self, names: Sequence[str]) -> tuple[int, ...]:
        """The category number of each of `names` in this table, matched by name (NONE for a name it lacks): how
        a model's classes are written in the files of a data set or benchmark with this table."""
        category = dict(zip(self.names, self.ids, strict=True))
        return tuple(category.get(name, NONE) for name in names)

    def to_yaml(self) -> dict[int, str]:
        """The `categories:` mapping of a data yaml that reads back as this table (`parse_categories`)."""
        return dict(zip(self.ids, self.names, strict=True))


VISDRONE = CategoryTable.numbered(VISDRONE_NAMES)
UAVDT = CategoryTable.of_mapping(UAVDT_CLASSES)
MOT = CategoryTable.of_mapping(MOT_CLASSES)
TRACKING_TABLES = {"visdrone-mot": VISDRONE, "uavdt": UAVDT, "mot": MOT}  # by `tphyolo.data.mot.layouts` name


def _whole(value: object) -> int | None:
    if type(value) is int:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def parse_categories(raw: object, names: Sequence[str], where: Path | str) -> CategoryTable:
    """The table of a data yaml's `categories:` mapping (category number -> class index or class name) for the
    classes `names`. Raises ValueError, one line naming `where` and the key, for a mapping that is not one, a
    category that is not a whole number >= 1, a class index outside 0..nc-1 or an unknown name, a class given
    twice, or a class without a category."""
    if not isinstance(raw, dict) or not raw:
        raise InputError(f"{where}: 'categories' must be a mapping of category number -> class, got {raw!r:.60}")
    class_of: dict[int, int] = {}
    for key, value in raw.items():
        category = _whole(key)
        if category is None or category < 1:
            raise InputError(f"{where}: 'categories' key {key!r:.40} is not a whole category number >= 1")
        if category in class_of:
            raise InputError(f"{where}: 'categories' gives category {category} twice")
        index = list(names).index(value) if isinstance(value, str) and value in names else _whole(value)
        if index is None or not 0 <= index < len(names):
            known = ", ".join(names)
            raise InputError(f"{where}: 'categories' {category}: {value!r:.40} is not a class index 0..{len(names) - 1}"
                             f" or a name of 'names' ({known})")  # fmt: skip
        if index in class_of.values():
            raise InputError(f"{where}: 'categories' {category}: class {names[index]!r} has a category already")
        class_of[category] = index
    missing = [names[i] for i in range(len(names)) if i not in class_of.values()]
    if missing:
        raise InputError(f"{where}: 'categories' gives no category to the class(es) {', '.join(missing)}")
    by_class = sorted(class_of.items(), key=lambda item: item[1])
    return CategoryTable(tuple(names), tuple(category for category, _ in by_class))


def table_for(names: Sequence[str], raw: object = None, where: Path | str = "data") -> CategoryTable:
    """A data set's table: its `categories:` mapping `raw` when given (`parse_categories`), else category =
    class index + 1 (VisDrone-DET's table for VisDrone's names)."""
    if raw is None:
        return VISDRONE if tuple(names) == VISDRONE_NAMES else CategoryTable.numbered(names)
    return parse_categories(raw, names, where)


def write_table(folder: Path, table: CategoryTable) -> Path:
    """Write `table` as `folder/TABLE_FILE` (`categories: {number: name}`, folders made); returns the file."""
    path = Path(folder) / TABLE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"categories": table.to_yaml()}, sort_keys=False), encoding="utf-8")
    return path


def read_table(folder: Path) -> CategoryTable | None:
    """The table `write_table` wrote into `folder`, None when there is no `TABLE_FILE`. Raises ValueError, one
    line naming the file, for one that is not a `categories:` mapping of unique numbers to unique names."""
    path = Path(folder) / TABLE_FILE
    if not path.is_file():
        return None
    data = load_yaml_file(path)
    raw = data.get("categories") if isinstance(data, dict) else None
    if not isinstance(raw, dict) or not all(isinstance(name, str) for name in raw.values()):
        raise InputError(f"{path}: expected 'categories:', a mapping of category number -> class name")
    ordered = sorted(raw.items(), key=lambda item: _whole(item[0]) if _whole(item[0]) is not None else -1)
    return parse_categories(dict(ordered), [name for _, name in ordered], path)

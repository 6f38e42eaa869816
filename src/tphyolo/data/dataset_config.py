"""Dataset yaml files in the YOLOv5 / ultralytics layout.

```yaml
path: ../datasets/VisDrone      # root; relative to the yaml's folder (built-in configs: to `datasets_dir`)
train: VisDrone2019-DET-train/images   # a folder, a .txt list of images, a COCO .json, or a list of these
val: [val_a/images, val_b.txt]
test: VisDrone2019-DET-test-dev/images  # optional
names: {0: pedestrian, 1: people}      # or a list; `nc` optional, checked when given
recipe: visdrone                       # optional: the training recipe it is made for (see train/recipes.py)
categories: {1: pedestrian, 2: people} # optional: category number -> class (see categories.py)
```

Split entries are resolved against `path`; lines of a .txt list are resolved against the list's folder.
The label format of each split is detected when it is scanned (see `scan.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.errors import InputError
from tphyolo.yaml_files import load_yaml_file

if TYPE_CHECKING:  # categories.py loads numpy: imported where used, so that a command's -h stays light
    from tphyolo.data.categories import CategoryTable

SPLITS = ("train", "val", "test")
BUILTIN_DATA = ("visdrone", "synthetic", "synthetic-fine", "synthetic-mot", "synthetic-large")


@dataclass(frozen=True)
class DataConfig:
    """A resolved dataset description. Split sources are absolute paths; `names[i]` is class i's name.

    `names` is empty when unknown (a bare image folder): the scan then infers the classes from the labels.
    `recipe` is the training recipe the yaml names (`recipe:`), None when it names none. `categories` is the
    category number of each class its `categories:` mapping gives, () without one (then class index + 1).
    """

    root: Path
    train: tuple[Path, ...]
    val: tuple[Path, ...]
    test: tuple[Path, ...] = ()
    names: tuple[str, ...] = ()
    source: Path | None = None
    recipe: str | None = None
    categories: tuple[int, ...] = ()

    @property
    def nc(self) -> int:
        return len(self.names)

    @property
    def category_table(self):
        """The `tphyolo.data.categories.CategoryTable` of the set's files."""
        from tphyolo.data.categories import CategoryTable, table_for  # numpy: not for a command's -h

        return CategoryTable(self.names, self.categories) if self.categories else table_for(self.names)

    def split(self, name: str) -> tuple[Path, ...]:
        if name not in SPLITS:
            raise InputError(f"unknown split {name!r}; known: {list(SPLITS)}")
        return getattr(self, name)


def builtin_data_yaml(name: str) -> Path:
    """Path of the packaged `configs/data/NAME.yaml`."""
    path = Path(str(resources.files("tphyolo").joinpath("configs", "data", f"{name}.yaml")))
    if not path.is_file():
        raise FileNotFoundError(f"no built-in data config {name!r} ({path})")
    return path


def _class_count(nc: object, where: Path) -> int | None:
    if nc is None:
        return None
    if type(nc) is not int or nc < 1:
        raise InputError(f"{where}: 'nc' must be a whole number of classes >= 1, got {nc!r:.60}")
    return nc


def _class_id(key: object, where: Path) -> int:
    if type(key) is int or (isinstance(key, str) and key.strip().isdigit()):
        return int(key)
    raise InputError(f"{where}: 'names' keys must be class ids 0, 1, ..., got {key!r:.60}")


def _names(raw: object, nc: object, where: Path) -> tuple[str, ...]:
    """The class names of a data yaml's `names` (a list, or a {id: name} mapping with ids 0..n-1) checked
    against `nc` when given; every failure is a ValueError naming `where` and the entry."""
    count = _class_count(nc, where)
    if raw is None:
        if count is None:
            raise InputError(f"{where}: needs 'names' (a list or a {{id: name}} mapping)")
        return tuple(f"class{i}" for i in range(count))
    if isinstance(raw, dict):
        by_id = {_class_id(k, where): v for k, v in raw.items()}
        if len(by_id) != len(raw):
            raise InputError(f"{where}: 'names' gives a class id twice: {sorted(map(str, raw))}")
        keys = sorted(by_id)
        if keys != list(range(len(keys))):
            raise InputError(f"{where}: 'names' ids must be 0..{len(keys) - 1}, got {keys}")
        values = [by_id[k] for k in keys]
    elif isinstance(raw, list):
        values = raw
    else:
        raise InputError(f"{where}: 'names' must be a list or a mapping, got {type(raw).__name__}")
    if not values:
        raise InputError(f"{where}: 'names' is empty; list the class names")
    for i, name in enumerate(values):
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"{where}: class {i} of 'names' must be a non-empty string (quote it), got {name!r:.60}")
    names = tuple(values)
    if count is not None and count != len(names):
        raise InputError(f"{where}: nc={count} but {len(names)} names")
    return names


def _sources(raw: object, root: Path, where: Path, split: str) -> tuple[Path, ...]:
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for item in items:
        if not isinstance(item, str):
            raise InputError(f"{where}: '{split}' entries must be paths, got {item!r}")
        p = Path(item).expanduser()
        out.append(p if p.is_absolute() else (root / p))
    return tuple(out)


def parse_data_yaml(path: Path, *, datasets_dir: Path | None = None) -> DataConfig:
    """Read a dataset yaml. A relative `path:` resolves against the yaml's folder, or `datasets_dir` when given
    (used for built-in configs). A missing `path:` means the yaml's folder."""
    path = Path(path)
    data = load_yaml_file(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping with 'train', 'val', 'names'")
    base = Path(datasets_dir) if datasets_dir is not None else path.parent
    root = Path(str(data.get("path") or ".")).expanduser()
    root = (root if root.is_absolute() else base / root).resolve()
    splits = {s: _sources(data.get(s), root, path, s) for s in SPLITS}
    if not splits["train"] and not splits["val"]:
        raise InputError(f"{path}: needs at least one of 'train' or 'val'")
    names = _names(data.get("names"), data.get("nc"), path)
    recipe = data.get("recipe")
    if recipe is not None and (not isinstance(recipe, str) or not recipe.strip()):
        raise InputError(f"{path}: 'recipe' must be a recipe name, got {recipe!r:.60}")
    categories = _categories(data.get("categories"), names, path)
    return DataConfig(root=root, names=names, source=path.resolve(), recipe=recipe, categories=categories, **splits)


def _categories(raw: object, names: tuple[str, ...], where: Path) -> tuple[int, ...]:
    """The category of each class of a `categories:` mapping (`tphyolo.data.categories.parse_categories`),
    () when there is none or it is category = class index + 1 (so such a set reads as one without it)."""
    if raw is None:
        return ()
    from tphyolo.data.categories import parse_categories  # numpy: not for a command's -h

    table = parse_categories(raw, names, where)
    return () if table.is_numbered else table.ids


def load_data_config(
    source: str | Path, *, datasets_dir: Path | None = None, cache_dir: Path | None = None
) -> DataConfig:
    """Resolve `source`: a built-in name (`BUILTIN_DATA`), a dataset yaml, or a bare image folder (then
    train = val = that folder, class names unknown).

    `datasets_dir` (default `./datasets`) anchors built-in configs; `cache_dir` is where the generated sets
    ('synthetic', 'synthetic-fine', 'synthetic-mot', 'synthetic-large') are written (default `~/.cache/tphyolo`)."""
    text = str(source)
    # The generators are imported where used: they load torch and OpenCV, and this module stays light for `-h`.
    if text == "synthetic":
        from tphyolo.data.builtin.synthetic import ensure_synthetic

        return _synthetic_recipe(parse_data_yaml(ensure_synthetic(cache_dir=cache_dir)))
    if text == "synthetic-large":  # 1536-2048 px scenes of VisDrone-sized objects, for training on tiles
        from tphyolo.data.builtin.synthetic import LARGE_SET, ensure_synthetic

        return _synthetic_recipe(parse_data_yaml(ensure_synthetic(cache_dir=cache_dir, large=True, **LARGE_SET)))
    if text == "synthetic-fine":
        from tphyolo.data.builtin.synthetic_fine import ensure_synthetic_fine

        return _synthetic_recipe(parse_data_yaml(ensure_synthetic_fine(cache_dir=cache_dir)))
    if text == "synthetic-mot":
        from tphyolo.data.builtin.synthetic_mot import ensure_synthetic_mot

        return _synthetic_recipe(parse_data_yaml(ensure_synthetic_mot(cache_dir=cache_dir)))
    if text in BUILTIN_DATA:
        yaml_path = builtin_data_yaml(text)
        data = parse_data_yaml(yaml_path, datasets_dir=Path(datasets_dir or "datasets"))
        _check_downloaded(data, text, yaml_path)
        return data
    path = Path(source).expanduser()
    if path.is_dir():
        folder = path.resolve()
        return DataConfig(root=folder, train=(folder,), val=(folder,))
    if path.is_file():
        return parse_data_yaml(path, datasets_dir=datasets_dir)
    raise FileNotFoundError(f"data {text!r}: no such file or folder, and not a built-in name ({list(BUILTIN_DATA)})")


def _check_downloaded(data: DataConfig, name: str, yaml_path: Path) -> None:
    """Raises FileNotFoundError when no split of the built-in dataset `name` is on disk, saying where it was
    looked for, how the folder is chosen, and where to get it (the config's `download` entry)."""
    sources = [source for split in SPLITS for source in data.split(split)]
    if any(source.exists() for source in sources):
        return
    download = _download(yaml_path)
    get = f"; get it from {download} and unzip it into {data.root}" if download else ""
    raise FileNotFoundError(
        f"dataset {name!r} is not downloaded: looked for {', '.join(map(str, sources))} (its folder {data.root} "
        f"is relative to the datasets folder, ./datasets unless --datasets-dir says otherwise){get}"
    )


def _download(yaml_path: Path | None) -> str | None:
    """The `download` entry of a data yaml (where to get the data, in words), None when it has none."""
    download = load_yaml_file(yaml_path).get("download") if yaml_path is not None else None
    return str(download) if download else None


def missing_split(data: DataConfig, split: str) -> str | None:
    """One line for a split whose sources are not all on disk: which are missing, and the download that
    gives them (the yaml's `download` entry, unzipped into the dataset's folder); None when all are there
    (or the split names none). A partly present split is scanned from the sources that are there."""
    missing = [source for source in data.split(split) if not source.exists()]
    if not missing:
        return None
    download = _download(data.source)
    get = f"; get it from {download} and unzip it into {data.root}" if download else ""
    return f"missing {', '.join(map(str, missing))}{get}"


def declared_table(folder: Path, *, levels: int = 3) -> tuple[CategoryTable, Path] | None:
    """The table of the data set that declares the VisDrone annotation folder `folder`, and its yaml: the first
    `data.yaml` in the `levels` folders above it one of whose splits has `folder` as the `annotations/` beside
    its `images/` (as the built-in sets and `tphyolo data` write them). None when no yaml declares it. Raises
    ValueError naming the yaml when it is not a valid data yaml."""
    folder = Path(folder).resolve()
    for parent in folder.parents[:levels]:
        path = parent / "data.yaml"
        if not path.is_file():
            continue
        config = parse_data_yaml(path)
        if any(source.parent / "annotations" == folder for split in SPLITS for source in config.split(split)):
            return config.category_table, path
    return None


def _synthetic_recipe(config: DataConfig) -> DataConfig:
    """A built-in generated set, whose yaml may predate its `recipe:` line, trains with the synthetic recipe."""
    return config if config.recipe else replace(config, recipe="synthetic")


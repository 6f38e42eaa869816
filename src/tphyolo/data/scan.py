"""Scanning a split: list its images, find and parse their labels, verify both, cache the result.

The label format is found by the registry `tphyolo.data.formats.FORMATS`: a split source that a whole-split
format describes (a COCO `.json`, a CVAT `.xml`, Label Studio tasks, or an `images/` folder with such a file
beside it) is read by that format;
otherwise each image's labels are in the first format whose label folder exists beside its `images/` folder
(`annotations/STEM.txt` -> VisDrone-DET; `labels/STEM.txt` (+ `ignore/STEM.txt`) -> YOLO).

Unusable images or label files are skipped and reported, naming the file and the problem (a path that is not a
regular file, image or label, is one: a folder, a FIFO, a device, a dangling link or a link loop is never
opened); images without a label file are kept as background. Files used only in part are kept and listed apart
(`ScanReport.partial`): a JPEG cut short (decoded with the missing part filled) and a label file with more
than `MAX_OBJECTS_PER_IMAGE` objects (the first ones kept). Images are verified by decoding them as training does
(`tphyolo.data.files.image_io.verify_image`). The scan result is cached where the format of the first labelled image
says (`<label folder>.cache.json`; COCO: `<json stem>.cache.json`), keyed by a hash of the names, sizes and
mtimes of every image and label file; a stale or unreadable cache is rebuilt. Where that folder cannot be
written (a read-only mount, no permission; found by trying), the cache goes under the user cache folder
(`~/.cache/tphyolo/scans/`, see `tphyolo.user_cache`), and is read from there next time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tphyolo.data.files.image_io import ImageError, is_image_name, verify_image
from tphyolo.data.files.json_files import load_json_file
from tphyolo.data.files.paths import is_read_only_folder, regular_file_problem
from tphyolo.data.formats import FORMATS
from tphyolo.data.formats.base import LabelEntry, label_folder_cache
from tphyolo.data.labels import ImageLabels, LabelError, limit_objects, sanitize
from tphyolo.errors import InputError
from tphyolo.user_cache import user_cache_dir

CACHE_VERSION = 2
LABEL_STATES = ("found", "missing", "empty", "corrupt")


@dataclass
class Record:
    """One usable image: its file, label file (None when missing), displayed size and sanitised labels."""

    im_file: str
    label_file: str | None
    height: int
    width: int
    labels: ImageLabels
    label_state: str  # "found" | "missing" | "empty"


@dataclass
class ScanReport:
    """What a scan found. `problems` name a skipped file and why; `partial` name a kept file used only in part
    and why (a truncated image, a label file over the object limit): the commands that score say which; `notes`
    are fixes applied to kept files and files the split does not use (label files without an image)."""

    images: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LABEL_STATES, 0))
    problems: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    cache_path: str | None = None
    from_cache: bool = False

    def summary(self) -> str:
        c = self.counts
        return (
            f"{self.images} images: {c['found']} labels found, {c['missing']} missing, {c['empty']} empty, "
            f"{c['corrupt']} corrupt ({len(self.problems)} problem(s), {len(self.partial)} partial, "
            f"{len(self.notes)} note(s))"
        )


@dataclass
class SplitScan:
    records: list[Record]
    report: ScanReport
    names: tuple[str, ...]


def _image_entry(image: Path) -> LabelEntry:
    """The first format whose label folder exists for `image`; else a background entry whose `label` is where
    the first per-image format would keep it (it keys the cache)."""
    for fmt in FORMATS.values():
        if (entry := fmt.image_entry(image)) is not None:
            return entry
    expected = (fmt.label_file(image) for fmt in FORMATS.values())
    return LabelEntry(image, None, next((p for p in expected if p is not None), None))


def _walk(folder: Path) -> list[Path]:
    """Every path under `folder` (files and folders), sorted, following symlinked folders but entering each
    real folder once (a link back up the tree is not a loop, and a folder linked twice is walked once)."""
    seen: set[tuple[int, int]] = set()
    paths: list[Path] = []
    for root, dirs, files in os.walk(folder, followlinks=True):
        try:
            info = os.stat(root)
        except OSError:
            dirs[:] = []
            continue
        if (info.st_dev, info.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        dirs.sort()
        paths += [Path(root) / name for name in (*dirs, *files)]
    return sorted(paths)


def _orphan_labels(items: list[LabelEntry]) -> list[str]:
    """Notes naming the per-image label files (.txt) in the split's label folders that no image of the split
    uses: a label whose image was renamed, moved or deleted."""
    used = {entry.label for entry in items if entry.label is not None and entry.label.suffix == ".txt"}
    folders = {label.parent for label in used}
    unused = sorted(p for folder in folders for p in folder.glob("*.txt") if p not in used and p.is_file())
    return [f"{p}: label file without an image in the split; not used" for p in unused]


def _expand_source(source: Path, problems: list[str]) -> list[LabelEntry]:
    for fmt in FORMATS.values():
        if (entries := fmt.split_entries(source)) is not None:
            return entries
    if source.is_dir():
        files = []
        for p in _walk(source):
            if not is_image_name(p):
                continue
            if (problem := regular_file_problem(p)) is None:
                files.append(p)
            else:
                problems.append(f"{p}: named like an image but not a regular file ({problem}); skipped")
        return [_image_entry(p) for p in files]
    if source.suffix.lower() == ".txt" and source.is_file():
        items = []
        for line in map(os.fsdecode, source.read_bytes().splitlines()):  # file names as the OS has them
            line = line.strip()
            if line:
                p = Path(line).expanduser()
                items.append(_image_entry(p if p.is_absolute() else (source.parent / p)))
        return items
    if source.is_file() and is_image_name(source):
        return [_image_entry(source)]
    raise FileNotFoundError(f"split source {source}: not a folder, an image list (.txt), a COCO .json or an image")


def _check(
    entry: LabelEntry, nc: int, categories: tuple[int, ...] = (), names: tuple[str, ...] = ()
) -> tuple[Record | None, str | None, list[str], list[str], str]:
    """(record or None, problem or None, notes, partial, label state) for one image; notes and partial name
    their file."""
    try:
        info = verify_image(entry.image)
    except ImageError as error:
        return None, str(error), [], [], "corrupt"
    notes = [f"{entry.image}: {n}" for n in (*info.notes, info.frame_note) if n is not None]
    partial = [] if info.partial is None else [f"{entry.image}: {info.partial}"]
    try:
        if entry.fmt is None or not os.path.lexists(entry.label):  # there but not a file: named by the reader
            labels, state = ImageLabels(), "missing"
        else:
            fmt = FORMATS[entry.fmt]
            mapped = {"categories": categories} if categories else {}  # a format of its own may not take them
            mapped |= {"names": names} if fmt.by_name else {}
            labels, read_notes = fmt.read(entry, width=info.width, height=info.height, num_classes=nc,
                                                       **mapped)  # fmt: skip
            notes += read_notes
            state = "found"
        if nc and len(labels.classes) and labels.classes.max() >= nc:
            raise LabelError(f"{entry.label}: class {int(labels.classes.max())} outside 0..{nc - 1}")
    except (LabelError, UnicodeDecodeError, OSError) as error:
        return None, str(error), notes, partial, "corrupt"
    labels, fixes = sanitize(labels, width=info.width, height=info.height)
    notes += [f"{entry.label}: {n}" for n in fixes]
    labels, cuts = limit_objects(labels)
    partial += [f"{entry.label}: {n}" for n in cuts]
    if state == "found" and len(labels.classes) == 0:
        state = "empty"
    label_file = str(entry.label) if entry.label is not None and state != "missing" else None
    record = Record(str(entry.image), label_file, info.height, info.width, labels, state)
    return record, None, notes, partial, state


def _files_hash(items: list[LabelEntry]) -> str:
    digest = hashlib.sha256(f"tphyolo-scan-v{CACHE_VERSION}".encode())
    seen = set()
    for item in items:
        for p in (item.image, item.label, item.ignore):
            if p is None or p in seen:
                continue
            seen.add(p)
            name = os.fsencode(p)  # the name's bytes: any name the OS allows, not only UTF-8
            try:
                st = os.stat(p)
                digest.update(name + f"\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            except OSError:
                digest.update(name + b"\0absent\n")
    return digest.hexdigest()


def _default_cache_path(items: list[LabelEntry]) -> Path | None:
    for item in items:
        if item.label is not None:
            return FORMATS[item.fmt].cache_file(item) if item.fmt is not None else label_folder_cache(item.label)
    return None


def _record_to_json(r: Record) -> dict:
    return {
        "im": r.im_file,
        "lb": r.label_file,
        "hw": [r.height, r.width],
        "state": r.label_state,
        "cls": r.labels.classes.tolist(),
        "box": r.labels.boxes.tolist(),
        "ign": r.labels.ignore.tolist(),
    }


def _record_from_json(d: dict) -> Record:
    labels = ImageLabels(np.array(d["cls"]), np.array(d["box"]), np.array(d["ign"]))
    h, w = (int(v) for v in d["hw"])
    if d["state"] not in ("found", "missing", "empty"):
        raise InputError(f"bad label state {d['state']!r}")
    return Record(str(d["im"]), d["lb"], h, w, labels, d["state"])


def _load_cache(path: Path, key: str, nc: int) -> tuple[list[Record], ScanReport] | None:
    """The cached scan when `path` holds a valid cache for `key`, else None (never trusts a bad file)."""
    try:
        data = load_json_file(path, what="scan cache")
        if data.get("version") != CACHE_VERSION or data.get("hash") != key or data.get("nc") != nc:
            return None
        records = [_record_from_json(d) for d in data["records"]]
        r = data["report"]
        report = ScanReport(
            images=int(r["images"]),
            counts={k: int(r["counts"][k]) for k in LABEL_STATES},
            problems=[str(p) for p in r["problems"]],
            partial=[str(p) for p in r["partial"]],
            notes=[str(n) for n in r["notes"]],
            formats=[str(f) for f in r["formats"]],
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return records, report


def fallback_cache_path(path: Path) -> Path:
    """Where the scan cache that belongs at `path` goes when `path`'s folder cannot be written: a file under
    the user cache folder named by a hash of `path`."""
    key = hashlib.sha256(os.fsencode(Path(os.path.abspath(path)))).hexdigest()[:24]
    return user_cache_dir() / "scans" / f"{key}.cache.json"


def _save_cache(path: Path, key: str, nc: int, records: list[Record], report: ScanReport) -> str | None:
    """Write the cache atomically; returns None when written, else why not. A folder without any write
    permission bit counts as read-only even for a user (root) who could write there anyway."""
    try:
        if is_read_only_folder(path.parent):
            return f"{path.parent} is read-only"
    except OSError as error:
        return f"{path.parent}: {error.strerror or error}"
    payload = {
        "version": CACHE_VERSION,
        "hash": key,
        "nc": nc,
        "records": [_record_to_json(r) for r in records],
        "report": {
            "images": report.images,
            "counts": report.counts,
            "problems": report.problems,
            "partial": report.partial,
            "notes": report.notes,
            "formats": report.formats,
        },
    }
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(payload), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as error:
        with contextlib.suppress(OSError):  # on a read-only mount, removing fails as writing did
            tmp.unlink(missing_ok=True)
        return f"{path}: {error.strerror or error}"
    return None


def _sources(sources: tuple[Path, ...] | list[Path] | Path) -> list[Path]:
    return [Path(sources)] if isinstance(sources, (str, Path)) else [Path(s) for s in sources]


def _own_names(items: list[LabelEntry]) -> tuple[str, ...]:
    formats = sorted({i.fmt for i in items if i.fmt is not None})
    return FORMATS[formats[0]].own_names(items) if len(formats) == 1 else ()


def format_class_names(sources: tuple[Path, ...] | list[Path] | Path) -> tuple[str, ...]:
    """The class names that the label format of a split's files defines (VisDrone's ten), found from the file
    names alone, before any image or label is read; () when the files are in several formats or in one that
    numbers its classes (YOLO), whose names `scan_split` takes from the labels."""
    return _own_names([item for s in _sources(sources) for item in _expand_source(s, [])])


def scan_split(
    sources: tuple[Path, ...] | list[Path] | Path,
    *,
    names: tuple[str, ...] = (),
    categories: tuple[int, ...] = (),
    cache: bool | Path = True,
    workers: int | None = None,
) -> SplitScan:
    """Scan a split given by its sources (folders, .txt image lists, COCO .json files, single images).

    `names` fixes the number of classes (labels with a class outside it are corrupt) and, for the formats that
    name their labels (CVAT, Label Studio), the class of each name; empty means infer: the format's own names
    when the whole split is in one format that has them (VisDrone; a tool's export: its labels), else max
    class + 1.
    `categories`: the category number of each class of a data set's `categories:` mapping (`DataConfig.
    categories`; () = class index + 1), for formats that number categories (VisDrone).
    `cache`: True = where the format keeps it (`<label folder>.cache.json`), a Path = that file, False = none.
    """
    problems: list[str] = []
    items = [item for s in _sources(sources) for item in _expand_source(s, problems)]
    formats = sorted({i.fmt for i in items if i.fmt is not None})
    own_names = _own_names(items)
    nc = len(names) or len(own_names)
    key = _files_hash(items) + ("" if not categories else ":categories=" + ",".join(map(str, categories)))
    by_name = any(FORMATS[f].by_name for f in formats)
    label_names = tuple(names) or own_names  # what the formats that name their labels map them by
    key += ":names=" + json.dumps(label_names) if by_name else ""
    cache_path = None if cache is False else (Path(cache) if cache is not True else _default_cache_path(items))
    places = [] if cache_path is None else [cache_path]
    if cache is True and cache_path is not None:
        places.append(fallback_cache_path(cache_path))
    loaded = None
    for place in places:
        if place.is_file() and (loaded := _load_cache(place, key, nc)) is not None:
            records, report = loaded
            report.cache_path, report.from_cache = str(place), True
            break
    if loaded is None:
        report = ScanReport(images=len(items) + len(problems), formats=formats, problems=problems)
        report.counts["corrupt"] += len(problems)
        report.notes += _orphan_labels(items)
        n_workers = workers or min(8, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=n_workers) as pool:
            results = list(pool.map(lambda i: _check(i, nc, categories, label_names), items))
        records = []
        for record, problem, notes, partial, state in results:
            report.counts[state] += 1
            report.notes += notes
            report.partial += partial
            if problem is not None:
                report.problems.append(problem)
            if record is not None:
                records.append(record)
        failures = []
        for place in places:
            if place != cache_path:
                with contextlib.suppress(OSError):
                    place.parent.mkdir(parents=True, exist_ok=True)
            if (failure := _save_cache(place, key, nc, records, report)) is None:
                report.cache_path = str(place)
                break
            failures.append(failure)
        if places and report.cache_path is None:
            report.notes.append(f"scan cache not saved ({'; '.join(failures)})")
    if not names:
        if own_names:
            names = own_names
        else:
            top = max((int(r.labels.classes.max()) for r in records if len(r.labels.classes)), default=-1)
            names = tuple(f"class{i}" for i in range(top + 1))
    return SplitScan(records, report, tuple(names))

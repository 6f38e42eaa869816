"""The folder of compiled checkpoints (`tphyolo.infer.backends.compiled`): where it is, what in it is
tphyolo's, whether an entry's files are still those it hashed, and a bound on its size.

Where: `$TPHYOLO_MODEL_CACHE`, else `<user cache>/compiled` (`model_cache_dir`); one folder per entry.

Bounded: every checkpoint compiled adds an entry (its IR, or ONNX file, and the verdict): a folder of retrained
or fine-tuned checkpoints would otherwise fill the disk. Using an entry marks it (`touch`: its folder's
modification time), and after a checkpoint is compiled `evict` removes the entries used longest ago until the
others fit in the limit, never the one just used; one line names what went. The limit is
`$TPHYOLO_MODEL_CACHE_MB` megabytes (`cache_limit_bytes`), DEFAULT_LIMIT_MB by default: an f32 IR takes about four
bytes per weight, so 2 GB keeps nine tph-yolov5l compiles (55.7 M weights, about 225 MB each), five tph-yolov5x
(103 M) or some two hundred tph-yolov5n (2.2 M, about 9 MB): the models of a project and their retrainings, a
small share of a disk. A removed entry is compiled again when next needed.

Owned: the cache removes only what it made. The cache folder gets a marker file (MARKER, holding tphyolo's name,
its role and FORMAT) when tphyolo creates it, finds it empty or it is the default folder (`claim_root`); each
entry gets one too, written before the entry goes in place. `evict` removes only marked entries of a marked
folder: a folder that holds other files and no marker (`$TPHYOLO_MODEL_CACHE` pointed at a project) is not the
cache's to clean, said once. In a marked folder, `clear_stale_staging` removes the staging folders of compiles
killed midway (the atomic writer's `.NAME.PID.tmp` and `.NAME.PID.old`, `tphyolo.data.files.atomic`) once
they are a day old: a compile takes minutes, so one that old is dead, whatever its PID has become.

Verified: an entry's verdict (VERDICT) holds the SHA-256 of each of its files (`file_hashes`); `check_files`
finds a file changed, truncated or missing since. `describe_entries` is what `tphyolo doctor` lists.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import time
from pathlib import Path

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.bounded_json import CacheFileError, read_json_bounded
from tphyolo.data.files.digest import file_sha256
from tphyolo.errors import InputError
from tphyolo.user_cache import user_cache_dir

LOGGER = logging.getLogger("tphyolo")
CACHE_ENV = "TPHYOLO_MODEL_CACHE"
VERDICT = "check.json"  # in each entry: what its check found, and the SHA-256 of its files ("files")
LIMIT_ENV = "TPHYOLO_MODEL_CACHE_MB"
DEFAULT_LIMIT_MB = 2048
MB = 1 << 20
MARKER = "tphyolo-cache.json"  # in the cache folder ("cache") and in each entry ("entry")
FORMAT = 1  # of the markers and the entries they mark
STALE_S = 24 * 3600  # a staging folder this old belongs to a compile that died
_STAGING = re.compile(r"^\..+\.(\d+)\.(tmp.*|old)$")  # `tphyolo.data.files.atomic`'s temporaries
_SAID_FOREIGN: set[Path] = set()  # cache folders already said not to be tphyolo's, once per process
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def model_cache_dir() -> Path:
    """Where compiled checkpoints are kept: `$TPHYOLO_MODEL_CACHE`, else `<user cache>/compiled`."""
    return Path(os.environ[CACHE_ENV]).expanduser() if os.environ.get(CACHE_ENV) else user_cache_dir() / "compiled"


def cache_limit_bytes() -> int:
    """The cache's size limit: `$TPHYOLO_MODEL_CACHE_MB` megabytes, else DEFAULT_LIMIT_MB. Raises ValueError
    naming the variable for a value that is not a whole number of megabytes, at least 0."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_LIMIT_MB * MB
    if not text.isdigit():
        raise InputError(f"${LIMIT_ENV} {text!r:.40}: the compiled-model cache's limit is a whole number of MB")
    return int(text) * MB


def touch(entry: Path) -> None:
    """Mark `entry` as used now (what `evict` orders by); a cache that cannot be written is left as it is."""
    with contextlib.suppress(OSError):  # a read-only cache still serves its entries; it is only not reordered
        os.utime(entry)


def write_marker(folder: Path, role: str) -> None:
    """Mark `folder` as tphyolo's `role` ("cache" or "entry"). Raises OSError when it cannot be written."""
    write_text_atomic(folder / MARKER, json.dumps({"owner": "tphyolo", "role": role, "format": FORMAT}) + "\n")


def is_marked(folder: Path, role: str) -> bool:
    """Whether `folder` holds tphyolo's marker for `role`, of this FORMAT (a file of any other content: no)."""
    try:
        marker = read_json_bounded(folder / MARKER, max_bytes=4096, max_depth=2)
    except CacheFileError:
        return False
    return marker == {"owner": "tphyolo", "role": role, "format": FORMAT}


def claim_root(root: Path, *, default: bool = False) -> bool:
    """Create the cache folder `root` if needed; whether it is tphyolo's: marked, or now marked because it was
    created, found empty or is the `default` folder (inside tphyolo's user cache, made by a tphyolo before the
    markers). Raises OSError when it cannot be created or marked."""
    root.mkdir(parents=True, exist_ok=True)
    if is_marked(root, "cache"):
        return True
    if not default and any(root.iterdir()):
        return False
    write_marker(root, "cache")
    return True


def clear_stale_staging(root: Path, *, now: float | None = None) -> list[Path]:
    """Remove the staging folders in `root` (module docstring) unchanged for STALE_S seconds before `now`
    (default: now), when `root` is tphyolo's. Returns those removed."""
    if not is_marked(root, "cache"):
        return []
    now = time.time() if now is None else now
    removed = []
    for path in root.iterdir():
        match = _STAGING.match(path.name)
        if match is None or int(match.group(1)) == os.getpid() or not path.is_dir() or path.is_symlink():
            continue
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to remove: left
            if now - path.stat().st_mtime > STALE_S:
                shutil.rmtree(path)
                removed.append(path)
    if removed:
        LOGGER.info("compiled-model cache %s: removed %d staging folder(s) of compiles that died: %s", root,
                    len(removed), ", ".join(p.name for p in removed))  # fmt: skip
    return removed


def entry_bytes(entry: Path) -> int:
    """The bytes of the files under `entry`."""
    return sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())


def evict(folder: Path, *, keep: Path, limit: int | None = None) -> list[Path]:
    """Remove the least recently used entries of `folder` (its folders holding an entry marker; hidden ones,
    being written, are not entries) until the rest take at most `limit` bytes (default `cache_limit_bytes()`),
    `keep` always staying; nothing when `folder` carries no cache marker (said once). Returns the removed
    entries, oldest first; one INFO line names them."""
    limit = cache_limit_bytes() if limit is None else limit
    if not is_marked(folder, "cache"):
        if folder not in _SAID_FOREIGN:
            _SAID_FOREIGN.add(folder)
            LOGGER.warning("compiled-model cache %s: not a folder tphyolo made (no %s, other files in it): "
                           "removing nothing from it; point $TPHYOLO_MODEL_CACHE at a folder of its own",
                           folder, MARKER)  # fmt: skip
        return []
    entries = [e for e in folder.iterdir() if e.is_dir() and not e.name.startswith(".") and is_marked(e, "entry")]
    newest_first = sorted(entries, key=lambda e: (e == keep, e.stat().st_mtime), reverse=True)
    sizes = {entry: entry_bytes(entry) for entry in newest_first}
    total, removed = sum(sizes.values()), []
    for entry in reversed(newest_first):
        if total <= limit or entry == keep:
            break
        shutil.rmtree(entry, ignore_errors=True)
        total -= sizes[entry]
        removed.append(entry)
    if removed:
        freed = sum(sizes[e] for e in removed) / MB
        LOGGER.info("compiled-model cache %s over %d MB ($%s): removed %d least recently used (%.0f MB): %s",
                    folder, limit // MB, LIMIT_ENV, len(removed), freed,
                    ", ".join(e.name for e in removed))  # fmt: skip
    return removed


def file_hashes(folder: Path) -> dict[str, str]:
    """The SHA-256 of every file under `folder`, by its path relative to `folder` ("a/b.bin", sorted)."""
    return {p.relative_to(folder).as_posix(): file_sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def check_files(entry: Path, files: object) -> None:
    """Check that each file `files` names (`file_hashes`' of `entry` when it was made) has that SHA-256 now.
    Raises ValueError naming the first that does not, or for `files` that are not such a mapping."""
    if not isinstance(files, dict) or not all(isinstance(h, str) and _SHA256.match(h) for h in files.values()):
        raise InputError(f"{VERDICT} holds no SHA-256 per file")
    for name, expected in files.items():
        if not name or ".." in Path(name).parts or Path(name).is_absolute():
            raise InputError(f"{VERDICT} names a file outside the entry: {name!r:.80}")
        if not (entry / name).is_file():
            raise InputError(f"{name} is missing")
        if file_sha256(entry / name) != expected:
            raise InputError(f"{name} differs from its SHA-256 in {VERDICT}")


def describe_entries(folder: Path | None = None) -> dict:
    """The cache `folder` (default `model_cache_dir()`) for `tphyolo doctor`: "dir", "tphyolo" (whether it carries
    the cache marker) and "entries", each folder's "name", "mb", "tphyolo" (its entry marker) and "verified" (its
    files match its verdict's hashes) or the "problem" (`check_files`; the verdict unreadable)."""
    folder = folder if folder is not None else model_cache_dir()
    found = []
    for entry in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        row = {"name": entry.name, "mb": round(entry_bytes(entry) / MB, 1), "tphyolo": is_marked(entry, "entry"),
               "verified": False, "problem": None}  # fmt: skip
        try:
            verdict = read_json_bounded(entry / VERDICT)
            check_files(entry, verdict.get("files") if isinstance(verdict, dict) else None)
            row["verified"] = True
        except (OSError, ValueError) as error:
            row["problem"] = str(error)[:160]
        found.append(row)
    return {"dir": str(folder), "tphyolo": folder.is_dir() and is_marked(folder, "cache"), "entries": found}

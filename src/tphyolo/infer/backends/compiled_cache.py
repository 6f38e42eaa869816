"""A bound on the compiled-checkpoint cache (`tphyolo.infer.backends.compiled`): least recently used entries go
once the entries together pass a size limit.

Every checkpoint compiled adds an entry (its IR, or ONNX file, and the verdict): a folder of retrained or
fine-tuned checkpoints would otherwise fill the disk. Using an entry marks it (`touch`: its folder's
modification time), and after a checkpoint is compiled `evict` removes the entries used longest ago until the
others fit in the limit, never the one just used; one line names what went. The limit is
`$TPHYOLO_MODEL_CACHE_MB`
megabytes (`cache_limit_bytes`), DEFAULT_LIMIT_MB by default: an f32 IR takes about four
bytes per weight, so 2 GB keeps nine tph-yolov5l compiles (55.7 M weights, about 225 MB each), five tph-yolov5x
(103 M) or some two hundred tph-yolov5n (2.2 M, about 9 MB): the models of a project and their retrainings, a
small share of a disk. A removed entry is compiled again when next needed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path

from tphyolo.errors import InputError

LOGGER = logging.getLogger("tphyolo")
LIMIT_ENV = "TPHYOLO_MODEL_CACHE_MB"
DEFAULT_LIMIT_MB = 2048
MB = 1 << 20


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


def entry_bytes(entry: Path) -> int:
    """The bytes of the files under `entry`."""
    return sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())


def evict(folder: Path, *, keep: Path, marker: str, limit: int | None = None) -> list[Path]:
    """Remove the least recently used entries of `folder` (its folders holding a `marker` file; hidden ones,
    being written, are not entries) until the rest take at most `limit` bytes (default `cache_limit_bytes()`),
    `keep` always staying. Returns the removed entries, oldest first; one INFO line names them."""
    limit = cache_limit_bytes() if limit is None else limit
    entries = [e for e in folder.iterdir() if e.is_dir() and not e.name.startswith(".") and (e / marker).is_file()]
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

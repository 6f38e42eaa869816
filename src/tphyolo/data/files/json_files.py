"""Reading JSON safely: the one reader for every JSON file the package takes from a user (COCO datasets and
results, evaluation records, scan caches, export metadata).

JSON builds only plain data, so the hazards are the text itself: bytes that are not UTF-8, invalid syntax and
nesting so deep that the parser runs out of stack (`[[[[...]]]]` 100,000 levels deep is 200 KB). All three are
refused with one ValueError naming the file (or the text's origin), what it should have been and the problem.
A leading UTF-8 byte-order mark (as some Windows tools write) is dropped, as the label readers do.

Python's parser recurses once per level and stops at the interpreter's recursion limit (about 1,000 levels,
far deeper than any file the package reads: a COCO dataset is 4 levels deep); that stop is caught and
reported here, so no caller meets a RecursionError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tphyolo.data.files.paths import require_regular_file
from tphyolo.errors import InputError


def load_json_text(text: str, origin: str, *, what: str = "JSON") -> Any:
    """Parse JSON `text` (from `origin`, named in errors; `what` says what it should be, e.g. "COCO dataset").
    Raises ValueError naming both for invalid JSON or nesting deeper than the parser allows."""
    try:
        return json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as error:
        raise InputError(f"{origin}: not valid JSON ({what}): {error}") from None
    except RecursionError:
        raise InputError(f"{origin}: {what} nested deeper than the JSON reader allows (about 1,000 levels)") from None


def load_json_file(path: str | Path, *, what: str = "JSON") -> Any:
    """Read and parse the JSON file `path` (UTF-8) as `load_json_text` does. Raises OSError when it cannot be
    read, ValueError naming it when it is not a regular file (a FIFO, a device: never opened), not UTF-8, not
    valid JSON or nested too deeply."""
    path = require_regular_file(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text ({what}; byte {error.start})") from None
    return load_json_text(text, str(path), what=what)

"""Reading a small JSON file that tphyolo wrote and keeps (a cache's verdicts, choices and markers) without
trusting it: the one reader for the caches' files, bounded in bytes and nesting.

A cache file is written by tphyolo, but anything may replace it: another program, a disk error, a user's file
where the cache lives. `read_json_bounded` reads at most `max_bytes` + 1 bytes (a larger file is refused
without being read whole), refuses nesting deeper than `max_depth` before parsing (the brackets outside
strings are counted with a regular expression and a running sum: no recursion, so `[[[[...]]]]` 100,000 levels
deep never reaches the parser, whose recursion would end in RecursionError), and raises `CacheFileError` for
every way the file fails, OSError included: a caller catches one type and treats the file as absent.
`read_kept_json` does the same and says a file that is there but cannot be used in one warning line, for
callers that treat it as absent without a word of their own.
"""

from __future__ import annotations

import json
import logging
import re
from itertools import accumulate
from pathlib import Path
from typing import Any

from tphyolo.data.files.paths import NO_SUCH_FILE, regular_file_problem
from tphyolo.errors import InputError

LOGGER = logging.getLogger("tphyolo")
MAX_BYTES = 256 * 1024  # the caches' files are a few KB (a verdict with its hashes: under 2 KB)
MAX_DEPTH = 16  # they nest 4 levels at most
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class CacheFileError(InputError):
    """A kept file that cannot be used: unreadable, too large, nested too deeply, not UTF-8 or not JSON. Its
    message names the file first."""


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON `text` (0 for a scalar), counted without recursion;
    brackets inside strings do not count. Meaningful for valid JSON (what the parser then accepts)."""
    brackets = _BRACKET.findall(_STRING.sub("", text))
    return max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0)


def read_json_bounded(path: str | Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in the file `path`. Raises CacheFileError naming it when it is not a regular file (a FIFO
    is never opened), cannot be read, holds more than `max_bytes` bytes, is not UTF-8, nests deeper than
    `max_depth` or is not valid JSON."""
    problem = regular_file_problem(path)
    if problem is not None:
        raise CacheFileError(f"{path}: {problem}")
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as error:
        raise CacheFileError(f"{path}: {(error.strerror or str(error)).lower()}") from None
    if len(data) > max_bytes:
        raise CacheFileError(f"{path}: larger than {max_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CacheFileError(f"{path}: not UTF-8 text (byte {error.start})") from None
    if (depth := json_depth(text)) > max_depth:
        raise CacheFileError(f"{path}: JSON nested {depth} levels deep (at most {max_depth})")
    try:
        return json.loads(text)
    except ValueError as error:  # JSONDecodeError, or a number past Python's digit limit
        raise CacheFileError(f"{path}: not valid JSON: {error}") from None


def read_kept_json(path: str | Path, *, instead: str) -> Any:
    """As `read_json_bounded`, and a file there that cannot be used is said in one warning line, "PATH: the
    problem; `instead`" (what the caller does without it), before CacheFileError is raised; a missing file
    raises it without a word."""
    try:
        return read_json_bounded(path)
    except CacheFileError as error:
        if regular_file_problem(path) != NO_SUCH_FILE:
            LOGGER.warning("%s; %s", error, instead)
        raise

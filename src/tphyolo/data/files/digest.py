"""A file's bytes fed to a hash in bounded memory: the one loop behind every SHA-256 of a file (release
downloads, resume records, the service's model hash, the compiled-model cache key)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

CHUNK = 1 << 20  # bytes read at a time: the most a file's hashing holds in memory


class Digest(Protocol):
    """A `hashlib` hash object, or anything with its `update`."""

    def update(self, data: bytes, /) -> None: ...


def update_with_file(digest: Digest, path: str | Path, *, chunk: int = CHUNK) -> None:
    """Feed the bytes of the file at `path` to `digest`, `chunk` bytes at a time: the digest then equals one
    fed `Path(path).read_bytes()` at once (whatever `chunk` is), while at most `chunk` bytes are held. Raises
    what `open` raises (FileNotFoundError, IsADirectoryError, ...)."""
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of the bytes of the file at `path`, 64 hex digits (`sha256sum`'s)."""
    digest = hashlib.sha256()
    update_with_file(digest, path)
    return digest.hexdigest()

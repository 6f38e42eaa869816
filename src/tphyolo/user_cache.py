"""The user cache folder of tphyolo: generated datasets, compiled graphs and other things worth keeping
between runs but safe to delete."""

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/tphyolo` (default `~/.cache/tphyolo`)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "tphyolo"

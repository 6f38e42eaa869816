"""The compiled-checkpoint cache keeps what fits in its limit, the entries used most recently first, the one in
use always (`tphyolo.infer.backends.compiled_cache`)."""

import os

import pytest

from tphyolo.infer.backends.compiled_cache import DEFAULT_LIMIT_MB, LIMIT_ENV, MB, cache_limit_bytes, evict, touch

MARKER = "check.json"


def entry(folder, name: str, *, size: int, used: float):
    """A cache entry `name` of `size` bytes (besides its marker) last used at `used` (epoch seconds)."""
    path = folder / name
    path.mkdir()
    (path / MARKER).write_text("")
    (path / "model.bin").write_bytes(b"\0" * size)
    os.utime(path, (used, used))
    return path


def test_the_least_recently_used_go_until_the_rest_fit(tmp_path):
    a, b, c = (entry(tmp_path, name, size=100, used=used) for name, used in (("a", 1.3e9), ("b", 1.0e9), ("c", 1.2e9)))
    hidden = entry(tmp_path, ".staging-d", size=500, used=0)  # being written: not an entry yet
    foreign = tmp_path / "notes"
    foreign.mkdir()  # no marker: not the cache's
    assert evict(tmp_path, keep=a, marker=MARKER, limit=250) == [b]
    assert evict(tmp_path, keep=a, marker=MARKER, limit=250) == []  # a and c fit
    touch(c)  # c is used now, a longest ago
    assert evict(tmp_path, keep=c, marker=MARKER, limit=100) == [a]
    assert evict(tmp_path, keep=c, marker=MARKER, limit=0) == []  # the entry in use stays, over the limit or not
    assert sorted(p.name for p in tmp_path.iterdir()) == [".staging-d", "c", "notes"] and hidden.exists()


def test_the_limit_is_a_setting_in_megabytes(monkeypatch):
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    assert cache_limit_bytes() == DEFAULT_LIMIT_MB * MB == 2048 * MB
    monkeypatch.setenv(LIMIT_ENV, "300")
    assert cache_limit_bytes() == 300 * MB
    for bad in ("2G", "-1", "1.5"):
        monkeypatch.setenv(LIMIT_ENV, bad)
        with pytest.raises(ValueError, match=rf"^\$TPHYOLO_MODEL_CACHE_MB '{bad}': .* whole number of MB$"):
            cache_limit_bytes()

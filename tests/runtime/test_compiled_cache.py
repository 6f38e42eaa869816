"""The compiled-checkpoint cache keeps what fits in its limit, the entries used most recently first, the one in
use always; it removes only what it made, and the staging folders of compiles that died once a day old
(`tphyolo.runtime.compiled_cache`)."""

import json
import logging
import os
import time

import pytest

from tphyolo.runtime.compiled_cache import (
    DEFAULT_LIMIT_MB,
    LIMIT_ENV,
    MARKER,
    MB,
    STALE_S,
    cache_limit_bytes,
    claim_root,
    clear_stale_staging,
    describe_entries,
    evict,
    file_hashes,
    touch,
    write_marker,
)


def entry(folder, name: str, *, size: int, used: float):
    """A cache entry `name` of `size` bytes (besides its marker) last used at `used` (epoch seconds)."""
    path = folder / name
    path.mkdir()
    write_marker(path, "entry")
    (path / "model.bin").write_bytes(b"\0" * size)
    os.utime(path, (used, used))
    return path


def test_the_least_recently_used_go_until_the_rest_fit(tmp_path):
    assert claim_root(tmp_path)  # empty: made the cache's
    a, b, c = (entry(tmp_path, name, size=100, used=used) for name, used in (("a", 1.3e9), ("b", 1.0e9), ("c", 1.2e9)))
    hidden = entry(tmp_path, ".staging-d", size=500, used=0)  # being written: not an entry yet
    foreign = tmp_path / "notes"
    foreign.mkdir()  # no marker: not the cache's
    assert evict(tmp_path, keep=a, limit=350) == [b]  # each takes 100 bytes and its marker's 50
    assert evict(tmp_path, keep=a, limit=350) == []  # a and c fit
    touch(c)  # c is used now, a longest ago
    assert evict(tmp_path, keep=c, limit=200) == [a]
    assert evict(tmp_path, keep=c, limit=0) == []  # the entry in use stays, over the limit or not
    assert sorted(p.name for p in tmp_path.iterdir()) == [".staging-d", "c", "notes", MARKER] and hidden.exists()


def test_a_users_folder_with_a_check_json_is_never_evicted(tmp_path):
    """Before the markers, any folder holding a check.json was an entry: a project in the cache folder went."""
    root = tmp_path / "cache"
    assert claim_root(root)
    project = root / "my-project"
    project.mkdir()
    (project / "check.json").write_text("{}")
    (project / "data.bin").write_bytes(b"\0" * 1000)
    os.utime(project, (1e9, 1e9))
    kept = entry(root, "tiny-0123456789abcdef", size=10, used=2e9)
    assert evict(root, keep=kept, limit=0) == [] and project.exists()


def test_a_folder_tphyolo_did_not_make_loses_nothing_said_once(tmp_path, caplog):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("")
    assert not claim_root(project)  # not empty, no marker: not the cache's
    copied = entry(project, "old-0123456789abcdef", size=10, used=1e9)  # even a tphyolo entry, copied in
    kept = entry(project, "tiny-0123456789abcdef", size=10, used=2e9)
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        assert evict(project, keep=kept, limit=0) == [] and evict(project, keep=kept, limit=0) == []
    assert copied.exists() and not (project / MARKER).exists()
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"compiled-model cache {project}: not a folder tphyolo made") and "removing nothing" in line


def test_a_marker_of_other_content_is_no_marker(tmp_path):
    (tmp_path / MARKER).write_text("[" * 100000)  # too deep to parse: no marker, and no RecursionError
    assert not claim_root(tmp_path)
    (tmp_path / MARKER).write_text('{"owner": "someone else", "role": "cache", "format": 1}')
    assert not claim_root(tmp_path)


def test_staging_folders_a_day_old_go_on_the_next_compile_fresh_ones_stay(tmp_path):
    """Before, a compile killed with -9 left `.NAME.PID.tmp` until the same entry was written again."""
    assert claim_root(tmp_path)
    stale = tmp_path / ".tiny-0123456789abcdef.4000001.tmp"
    fresh = tmp_path / ".other-0123456789abcdef.4000002.tmp"
    aside = tmp_path / ".old-0123456789abcdef.4000003.old"
    for folder in (stale, fresh, aside):
        (folder / "model_openvino_model").mkdir(parents=True)
    day_ago = time.time() - STALE_S - 60
    for folder in (stale, aside):
        os.utime(folder, (day_ago, day_ago))
    user = tmp_path / ".hidden-notes"  # not a staging name
    user.mkdir()
    os.utime(user, (day_ago, day_ago))
    assert sorted(clear_stale_staging(tmp_path)) == sorted([stale, aside])
    assert fresh.exists() and user.exists() and not stale.exists()


def test_doctor_lists_entries_with_their_size_owner_and_whether_their_files_match(tmp_path):
    assert claim_root(tmp_path)
    good = entry(tmp_path, "good", size=MB, used=1e9)
    (good / "check.json").write_text('{"files": ' + json.dumps(file_hashes(good)) + "}")
    bad = entry(tmp_path, "flipped", size=10, used=1e9)
    (bad / "check.json").write_text('{"files": ' + json.dumps(file_hashes(bad)) + "}")
    (bad / "model.bin").write_bytes(b"\1" * 10)
    (tmp_path / "notes").mkdir()
    found = describe_entries(tmp_path)
    assert found["tphyolo"] and [e["name"] for e in found["entries"]] == ["flipped", "good", "notes"]
    flipped, good_row, notes = found["entries"]
    assert good_row["verified"] and good_row["tphyolo"] and good_row["mb"] == 1.0
    assert not flipped["verified"] and flipped["problem"] == "model.bin differs from its SHA-256 in check.json"
    assert not notes["tphyolo"] and not notes["verified"]


def test_the_limit_is_a_setting_in_megabytes(monkeypatch):
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    assert cache_limit_bytes() == DEFAULT_LIMIT_MB * MB == 2048 * MB
    monkeypatch.setenv(LIMIT_ENV, "300")
    assert cache_limit_bytes() == 300 * MB
    for bad in ("2G", "-1", "1.5"):
        monkeypatch.setenv(LIMIT_ENV, bad)
        with pytest.raises(ValueError, match=rf"^\$TPHYOLO_MODEL_CACHE_MB '{bad}': .* whole number of MB$"):
            cache_limit_bytes()

"""Run folders started together: each run gets a folder of its own (`new_run_dir` takes a name by creating it)."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tphyolo.runtime.run_dir import new_run_dir, removed_if_left_empty

RUNS = 8


def test_runs_started_together_get_distinct_folders(tmp_path, monkeypatch):
    """Threads released together by a barrier each ask for runs/exp. A look at the folder (`Path.exists`) waits
    until every run has looked, as runs started in the same instant do: a name chosen by looking first (the old
    check-then-`mkdir(exist_ok=True)`) then gives every run the same folder; names taken by creating them stay
    distinct whatever the order."""
    start = threading.Barrier(RUNS, timeout=10)
    looked = threading.Barrier(RUNS, timeout=10)
    first_look = threading.local()
    exists = Path.exists

    def exists_once_all_looked(self: Path, *args, **kwargs) -> bool:
        found = exists(self, *args, **kwargs)
        if getattr(first_look, "pending", False):  # a run's first look (other threads pass)
            first_look.pending = False
            with contextlib.suppress(threading.BrokenBarrierError):
                looked.wait()
        return found

    monkeypatch.setattr(Path, "exists", exists_once_all_looked)

    def run(_: int) -> Path:
        first_look.pending = True
        start.wait()
        return new_run_dir(tmp_path / "runs", "exp")

    with ThreadPoolExecutor(RUNS) as pool:
        folders = list(pool.map(run, range(RUNS)))
    assert len(set(folders)) == RUNS, sorted(f.name for f in folders)
    assert sorted(f.name for f in folders) == sorted(["exp", *(f"exp{n}" for n in range(2, RUNS + 1))])


def test_names_are_numbered_and_exist_ok_reuses(tmp_path):
    assert new_run_dir(tmp_path, "exp") == tmp_path / "exp"
    assert new_run_dir(tmp_path, "exp") == tmp_path / "exp2"
    (tmp_path / "exp3").write_text("a file takes the name too")
    assert new_run_dir(tmp_path, "exp") == tmp_path / "exp4"
    assert new_run_dir(tmp_path, "exp", exist_ok=True) == tmp_path / "exp"
    assert new_run_dir(tmp_path / "new" / "deep", "exp") == tmp_path / "new" / "deep" / "exp"


def test_a_failed_run_leaves_no_folder_holding_only_its_bookkeeping(tmp_path):
    fresh, earlier = tmp_path / "exp", tmp_path / "kept"
    fresh.mkdir()
    earlier.mkdir()
    (earlier / "args.yaml").write_text("argv: []\n")  # an earlier run's, reused with --exist-ok
    for folder in (fresh, earlier):
        with pytest.raises(FileNotFoundError), removed_if_left_empty(folder, ignoring=("args.yaml",)):
            (folder / "args.yaml").write_text("argv: [--x]\n")
            (folder / "mot").mkdir(exist_ok=True)
            raise FileNotFoundError("input")
    assert not fresh.exists() and (earlier / "args.yaml").is_file()

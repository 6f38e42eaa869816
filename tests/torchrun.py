"""Running commands and test workers under torchrun on CPU (gloo), and comparing what they write with what one
process writes. Not a test module."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def torchrun(*args: str, nproc: int = 2, timeout: int = 600, check: bool = True) -> subprocess.CompletedProcess:
    """`python -m torch.distributed.run --standalone --nproc_per_node NPROC ARGS`, one thread per process (the
    floats of a CPU run depend on the thread count: compare runs at equal counts), with the repository (for
    `tests.`) and its source on the path. With `check`, a failure shows its output's end."""
    path = os.pathsep.join([str(REPO), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    if check:
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


def same_settings(a: Path, b: Path, *, aside: tuple[str, ...] = ("output",)) -> None:
    """Check that run folders `a` and `b` keep the same settings (args.yaml), the job's settings `aside` (where
    each run writes: its own folder's name) aside."""
    saved = [yaml.safe_load((run / "args.yaml").read_text()) for run in (a, b)]
    for settings in saved:
        for name in aside:
            settings["job"].pop(name)
    assert saved[0] == saved[1]


def same_files(a: Path, b: Path, *, ignore: tuple[str, ...] = ()) -> list[str]:
    """The relative paths of the files under `a`, after checking that `b` holds the same files, byte for byte
    (paths under a folder named in `ignore` aside)."""

    def listed(root: Path) -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                      if p.is_file() and not set(p.relative_to(root).parts) & set(ignore))  # fmt: skip

    files = listed(a)
    assert files == listed(b)
    differ = [f for f in files if not filecmp.cmp(a / f, b / f, shallow=False)]
    assert not differ, differ
    return files

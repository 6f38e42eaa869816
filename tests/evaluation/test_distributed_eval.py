"""Validation under torchrun (2 CPU processes, gloo) against one process: the same numbers, table and files.

Five images in batches of two make three batches, dealt 2 + 1 over the two ranks (an uneven share)."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.evaluation.distributed_val_worker import main as val_worker

from tphyolo.data.formats.visdrone import NAMES

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def torchrun(*args: str, nproc: int = 2, timeout: int = 300) -> subprocess.CompletedProcess:
    """`python -m torch.distributed.run --standalone --nproc_per_node N ARGS` with one thread per process, the
    repository (for `tests.`) and the source on the path."""
    path = os.pathsep.join([str(REPO), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


@pytest.fixture(scope="module")
def five_images(visdrone_mini, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("visdrone5")
    for folder in ("images", "annotations"):
        (root / folder).mkdir()
    for image in sorted((visdrone_mini / "images").glob("*.jpg"))[:5]:
        shutil.copy(image, root / "images" / image.name)
        shutil.copy(visdrone_mini / "annotations" / f"{image.stem}.txt", root / "annotations" / f"{image.stem}.txt")
    path = root / "data.yaml"
    path.write_text(f"path: {root}\ntrain: images\nval: images\nnames: {list(NAMES)}\n")
    return path


def same_files(a: Path, b: Path) -> list[str]:
    """The relative paths of the files under `a` (all of them), after checking that `b` has the same, byte for
    byte."""
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    differ = [f for f in files if not filecmp.cmp(a / f, b / f, shallow=False)]
    assert not differ, differ
    return files


def test_two_processes_score_and_save_what_one_does(five_images, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    val_worker(str(five_images), str(one))
    run = torchrun(str(REPO / "tests" / "evaluation" / "distributed_val_worker.py"), str(five_images), str(two))
    assert "/3 [" in run.stderr and "/2 [" not in run.stderr  # rank 0's bar alone, counting the 3 batches of all
    for protocol in ("yolo", "visdrone"):
        a, b = (json.loads((d / f"{protocol}.json").read_text()) for d in (one, two))
        assert a["images"] == b["images"] == 5 and a["table"] == b["table"]
        assert 0.1 < a["metrics"]["mAP50"] < 0.9  # the noisy oracle is neither useless nor perfect
        for key, value in a["metrics"].items():
            assert b["metrics"][key] == pytest.approx(value, abs=1e-9), key
        assert a["per_class"] == b["per_class"]
        files = same_files(one / protocol, two / protocol)
        assert {"predictions.json", "confusion_matrix.png", "PR_curve.png", "val_batch0_pred.jpg"} <= set(files)
        assert sum(f.startswith("labels/") for f in files) == 5

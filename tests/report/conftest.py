"""Detectors that know the answer, as VisDrone result folders made from the sample annotations.

- the oracle: every annotation line fed back as a detection (score 1);
- known misses: every object at an odd line of its file dropped, the rest fed back exactly (recall per size
  bucket is then known from the annotations alone);
- a simulated detector for the README picture: boxes jittered, small objects missed more often, false positives
  added, scores from 0.3 to 1 (seeded).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tphyolo.evaluation.detection_files import read_visdrone_rows


def _write_rows(path: Path, rows: np.ndarray) -> None:
    path.write_text("".join(",".join(f"{v:g}" for v in row[:8]) + "\n" for row in rows))


def write_known_misses(annotations: Path, out: Path) -> None:
    """Objects (categories 1..10) at even line indices kept as detections, the others dropped."""
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(annotations.glob("*.txt")):
        rows = read_visdrone_rows(path)
        keep = (np.arange(len(rows)) % 2 == 0) & (rows[:, 5] >= 1) & (rows[:, 5] <= 10)
        det = rows[keep].copy()
        det[:, 4] = 1.0
        _write_rows(out / path.name, det)


def write_simulated(annotations: Path, out: Path, *, seed: int = 0) -> None:
    """The simulated detector of the module docstring."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(annotations.glob("*.txt")):
        rows = read_visdrone_rows(path)
        rows = rows[(rows[:, 5] >= 1) & (rows[:, 5] <= 10)]
        side = np.sqrt(rows[:, 2] * rows[:, 3])
        found = rng.random(len(rows)) < np.clip(side / 40, 0.1, 0.95)
        det = rows[found].copy()
        det[:, :4] += rng.normal(0, 0.08, (len(det), 4)) * np.repeat(np.sqrt(det[:, 2:4].prod(1))[:, None], 4, 1)
        det[:, 2:4] = np.clip(det[:, 2:4], 2, None)
        det[:, 4] = rng.uniform(0.5, 1.0, len(det))
        false = rows[rng.random(len(rows)) < 0.15].copy()
        false[:, :2] += rng.uniform(-3, 3, (len(false), 2)) * false[:, 2:4]
        false[:, :2] = np.clip(false[:, :2], 0, None)
        false[:, 4] = rng.uniform(0.3, 0.8, len(false))
        det = np.concatenate([det, false])
        _write_rows(out / path.name, det[np.argsort(-det[:, 4], kind="stable")])


@pytest.fixture(scope="session")
def visdrone_samples(visdrone_mini: Path, tmp_path_factory) -> Path:
    """A copy of the sample annotations and images, with result folders `oracle/`, `misses/` and `simulated/`."""
    root = tmp_path_factory.mktemp("visdrone-report")
    shutil.copytree(visdrone_mini / "annotations", root / "annotations")
    (root / "images").symlink_to(visdrone_mini / "images")
    shutil.copytree(visdrone_mini / "annotations", root / "oracle")
    write_known_misses(root / "annotations", root / "misses")
    write_simulated(root / "annotations", root / "simulated")
    return root


@pytest.fixture(scope="session")
def simulated_report(visdrone_samples: Path, tmp_path_factory) -> Path:
    """A run folder with the report of the simulated detector on the samples, scored by the VisDrone protocol."""
    from tphyolo.cli import main

    run = tmp_path_factory.mktemp("simulated-run")
    argv = ["eval", "--gt", str(visdrone_samples / "annotations"), "--pred", str(visdrone_samples / "simulated")]
    assert main([*argv, "--protocol", "visdrone", "--report", str(run)]) == 0
    return run

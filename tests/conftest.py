"""Shared test settings: where the read-only reference files live, and small-thread torch."""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("TPHYOLO_SHARED", REPO_ROOT.parent / "shared"))
PARITY_DIR = SHARED_DIR / "fixtures" / "parity"
VISDRONE_MINI_DIR = SHARED_DIR / "data" / "visdrone-mini"


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        pytest.skip(f"{what} not found at {path}; set TPHYOLO_SHARED to the folder that holds fixtures/ and data/")
    return path


@pytest.fixture(scope="session")
def parity_dir() -> Path:
    """The original implementation's reference outputs (`shared/fixtures/parity`)."""
    return _require(PARITY_DIR, "reference fixtures")


@pytest.fixture(scope="session")
def visdrone_mini() -> Path:
    """40 real VisDrone2019-DET images with their original annotations (`shared/data/visdrone-mini`)."""
    return _require(VISDRONE_MINI_DIR, "VisDrone sample data")

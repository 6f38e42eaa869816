"""Fixtures of the data tests: a writable copy of visdrone-mini (images linked, annotations copied)."""

import shutil
from pathlib import Path

import pytest


@pytest.fixture
def visdrone_copy(visdrone_mini: Path, tmp_path: Path) -> Path:
    """`tmp_path/visdrone/{images,annotations}`: scan caches can be written here, not in the shared folder."""
    root = tmp_path / "visdrone"
    (root / "images").mkdir(parents=True)
    for image in sorted((visdrone_mini / "images").iterdir()):
        (root / "images" / image.name).symlink_to(image)
    shutil.copytree(visdrone_mini / "annotations", root / "annotations")
    (root / "annotations").chmod(0o755)
    for f in (root / "annotations").iterdir():
        f.chmod(0o644)
    return root

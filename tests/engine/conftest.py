"""Small datasets for engine tests."""

import shutil
from pathlib import Path

import pytest

from tphyolo.data.formats.visdrone import NAMES
from tphyolo.data.synthetic import generate_synthetic


@pytest.fixture(scope="session")
def tiny_synthetic(tmp_path_factory) -> Path:
    """A data yaml of 8 training and 4 validation synthetic scenes at 256 px."""
    root = tmp_path_factory.mktemp("tiny-synthetic")
    return generate_synthetic(root, n_train=8, n_val=4, imgsz=256, seed=1)


@pytest.fixture(scope="module")
def data_yaml(visdrone_mini, tmp_path_factory):
    """Four VisDrone images with their annotations, copied so that the scan cache is written here."""
    root = tmp_path_factory.mktemp("visdrone")
    for folder in ("images", "annotations"):
        (root / folder).mkdir()
    for image in sorted((visdrone_mini / "images").glob("*.jpg"))[:4]:
        shutil.copy(image, root / "images" / image.name)
        shutil.copy(visdrone_mini / "annotations" / f"{image.stem}.txt", root / "annotations" / f"{image.stem}.txt")
    path = root / "data.yaml"
    path.write_text(f"path: {root}\ntrain: images\nval: images\nnames: {list(NAMES)}\n")
    return path

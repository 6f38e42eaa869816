"""Small datasets for engine tests."""

from pathlib import Path

import pytest

from tphyolo.data.synthetic import generate_synthetic


@pytest.fixture(scope="session")
def tiny_synthetic(tmp_path_factory) -> Path:
    """A data yaml of 8 training and 4 validation synthetic scenes at 256 px."""
    root = tmp_path_factory.mktemp("tiny-synthetic")
    return generate_synthetic(root, n_train=8, n_val=4, imgsz=256, seed=1)

"""Fixtures of the crop-classifier tests."""

from pathlib import Path

import pytest
from painted_scene import FORMATS, write_painted


@pytest.fixture(params=FORMATS)
def painted_data(request, tmp_path) -> Path:
    """The painted scene's data yaml, once per label format."""
    return write_painted(tmp_path / request.param, request.param)

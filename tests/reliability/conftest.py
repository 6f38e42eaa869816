"""Fixtures of the reliability tests: one untrained two-class checkpoint for every command that loads weights."""

from pathlib import Path

import pytest
import torch
from tests.helpers import save_model_checkpoint

from tphyolo.models import build_model


@pytest.fixture(scope="session")
def weights(tmp_path_factory) -> Path:
    """A yolov5n checkpoint with classes a, b and seeded random weights (the commands' outputs are checked,
    not its detections)."""
    torch.manual_seed(0)
    model = build_model("yolov5n", num_classes=2)
    return save_model_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt", model, ["a", "b"])

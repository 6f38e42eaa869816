"""A command that reads no input leaves no run folder behind (only its saved settings would be in it), so that
the next run keeps the name."""

import pytest
from tests.helpers import seeded_checkpoint

from tphyolo.cli import main


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    return seeded_checkpoint(tmp_path_factory.mktemp("weights") / "w.pt", ["car", "bus"])


@pytest.mark.parametrize("command", ["predict", "track"])
def test_a_run_whose_source_does_not_decode_leaves_no_folder(command, weights, tmp_path, capsys):
    (tmp_path / "frames").mkdir()
    (tmp_path / "frames" / "a.jpg").write_text("not an image")
    argv = [command, "--weights", str(weights), "--source", str(tmp_path / "frames"), "--runtime", "pytorch",
            "--device", "cpu", "--project", str(tmp_path / "runs"), "--name", "exp"]  # fmt: skip
    assert main(argv) == 1
    assert "could be read" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "exp").exists()  # was: a folder of args.yaml and decisions.yaml

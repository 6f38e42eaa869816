"""The tutorial notebook runs top to bottom, so that it cannot rot: executed by the command line the docs give
(`jupyter nbconvert --execute`, a Jupyter kernel in its own process) in a fresh folder, every command cell must
succeed and the cells that show results must show them.

The Jupyter stack (nbconvert, the kernel and its ZeroMQ sockets) lives in child processes only: the test process
imports none of it (twice a test process died during or right after this test while it held that stack) and
reads the executed notebook as the JSON file it is."""

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.notebooks.test_notebook_command import notebook_commands

MISSING = [name for name in ("nbconvert", "ipykernel") if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"the dev extra's {MISSING} are not installed")

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"
FAILURE_MARKS = ("Traceback (most recent call last)", "tphyolo: error", "command not found")
CELL_TIMEOUT_S = 900


def _stream_text(cell) -> str:
    return "".join("".join(out.get("text", "")) for out in cell.get("outputs", []) if out["output_type"] == "stream")


def _execute_as_documented(folder: Path) -> Path:
    """Runs the docs' nbconvert command on a copy of the notebook in `folder` (the kernel's working folder) and
    returns the executed notebook."""
    shutil.copy(NOTEBOOK, folder / NOTEBOOK.name)
    command = shlex.split(notebook_commands()[0][0].replace("notebooks/quickstart.ipynb", NOTEBOOK.name))
    assert command[:2] == ["jupyter", "nbconvert"], command
    # `!tphyolo` cells find the console script of the interpreter running the tests
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    argv = [sys.executable, "-m", "nbconvert", *command[2:], f"--ExecutePreprocessor.timeout={CELL_TIMEOUT_S}"]
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-4000:]  # a Python cell that raises fails here, naming the cell
    (executed,) = (folder / "runs" / "notebook").glob("*.ipynb")
    return executed


@pytest.mark.slow
@pytest.mark.notebook  # on its own, after the parallel run: beside it a pytest-xdist worker died twice
def test_quickstart_notebook_runs_top_to_bottom(tmp_path):
    notebook = json.loads(_execute_as_documented(tmp_path).read_text())

    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    for cell in code:  # `!` shell commands do not raise: their output is checked instead
        text = _stream_text(cell)
        source = "".join(cell["source"])
        assert not any(mark in text for mark in FAILURE_MARKS), f"cell {source!r} failed:\n{text[-2000:]}"

    def output_of(command: str) -> str:
        return next(_stream_text(cell) for cell in code if "".join(cell["source"]).startswith(f"!tphyolo {command}"))

    assert "epoch 3/3" in output_of("train")
    assert "AP50" in output_of("val")  # the VisDrone protocol's table
    images = [out for cell in code for out in cell["outputs"] if {"image/png", "image/jpeg"} & set(out.get("data", {}))]
    assert len(images) == 3  # the results plot, the image drawn with the TTA + WBF detections, a tracked frame
    assert (tmp_path / "runs" / "train" / "quick" / "weights" / "last.pt").is_file()
    assert any((tmp_path / "runs" / "predict" / "tta").glob("*.jpg"))
    assert "val-000: " in output_of("track") and "20 frames" in output_of("track")
    assert len(list((tmp_path / "runs" / "track" / "clip" / "val-000").glob("*.jpg"))) == 20

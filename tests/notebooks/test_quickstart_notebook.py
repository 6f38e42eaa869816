"""The tutorial notebook runs top to bottom, so that it cannot rot: executed by a Jupyter kernel in a fresh
folder, every command cell must succeed and the cells that show results must show them."""

import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"
FAILURE_MARKS = ("Traceback (most recent call last)", "tphyolo: error", "command not found")


def _stream_text(cell) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", []) if out.output_type == "stream")


@pytest.mark.slow
def test_quickstart_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    # `!tphyolo` cells find the console script of the interpreter running the tests; every run folder goes
    # under tmp_path (the synthetic set is generated once into the user cache, as for a user)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # a Python cell that raises fails here, naming the cell

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for cell in code:  # `!` shell commands do not raise: their output is checked instead
        text = _stream_text(cell)
        assert not any(mark in text for mark in FAILURE_MARKS), f"cell {cell.source!r} failed:\n{text[-2000:]}"

    def output_of(command: str) -> str:
        return next(_stream_text(cell) for cell in code if cell.source.startswith(f"!tphyolo {command}"))

    assert "epoch 3/3" in output_of("train")
    assert "AP50" in output_of("val")  # the VisDrone protocol's table
    images = [out for cell in code for out in cell.outputs if "image/png" in out.get("data", {})] + [
        out for cell in code for out in cell.outputs if "image/jpeg" in out.get("data", {})
    ]
    assert len(images) == 3  # the results plot, the image drawn with the TTA + WBF detections, a tracked frame
    assert (tmp_path / "runs" / "train" / "quick" / "weights" / "last.pt").is_file()
    assert any((tmp_path / "runs" / "predict" / "tta").glob("*.jpg"))
    assert "val-000: " in output_of("track") and "20 frames" in output_of("track")
    assert len(list((tmp_path / "runs" / "track" / "clip" / "val-000").glob("*.jpg"))) == 20

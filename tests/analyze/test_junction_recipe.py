"""The junction recipe of docs/analytics.md on the built-in set: its lines and zone, run on the true tracks of
synthetic-mot's validation split, count what the page says they count (and count something)."""

import re
from pathlib import Path

import pytest
import yaml

from tphyolo.cli import main
from tphyolo.data.builtin.synthetic_mot import GENERATOR_VERSION, generate_synthetic_mot

PAGE = Path(__file__).resolve().parents[2] / "docs" / "analytics.md"


def _block(text: str, kind: str, after: str) -> str:
    """The first ```kind block of `text` after the words `after`."""
    match = re.search(rf"```{kind}\n(.*?)```", text[text.index(after) :], re.S)
    assert match is not None, (kind, after)
    return match.group(1)


@pytest.mark.slow
def test_the_junction_recipe_counts_what_the_page_says(tmp_path, capsys):
    text = PAGE.read_text(encoding="utf-8")
    lines = tmp_path / "junction.yaml"
    lines.write_text(_block(text, "yaml", "## Lines and zones"), encoding="utf-8")
    cache_name = f"synthetic-mot-v{GENERATOR_VERSION}-s0-4x2x60"  # the built-in set's folder the page names
    assert f"~/.cache/tphyolo/{cache_name}/val/annotations" in _block(text, "bash", "On the built-in set")
    generate_synthetic_mot(tmp_path / "set", n_train=0, n_val=2)  # the built-in val split (same seeds)
    val = tmp_path / "set" / "val"
    argv = ["analyze", "--tracks", str(val / "annotations"), "--source", str(val / "sequences"), "--lines",
            str(lines), "--no-save-video", "--project", str(tmp_path), "--name", "junction"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0

    def summary(block: str) -> list[str]:  # the rates are this machine's
        return [re.sub(r"analytics at \d+ frames/s", "analytics at N frames/s", line)
                for line in block.splitlines() if line.startswith(("val-", "  "))]  # fmt: skip

    printed = summary(capsys.readouterr().out)
    assert printed == summary(_block(text, "text", "the `analyze` command on the built-in set prints"))
    counts = yaml.safe_load((tmp_path / "junction" / "val-000" / "counts.json").read_text())
    for line in ("main_road", "side_road"):
        assert sum(sum(per.values()) for per in counts["lines"][line].values()) > 0, line

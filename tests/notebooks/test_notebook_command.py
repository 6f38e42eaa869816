"""The command line the README gives for running the tutorial notebook works with what the dev extra installs."""

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_command_for_the_notebook_is_installed_by_dev():
    commands = re.findall(r"`(jupyter (\w+) [^`]*notebooks/quickstart\.ipynb)`", (ROOT / "README.md").read_text())
    assert commands, "the README gives no command line that runs the notebook"
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    for _, tool in commands:
        assert any(re.match(rf"{tool}\b", requirement) for requirement in dev), f"[dev] does not install {tool}"

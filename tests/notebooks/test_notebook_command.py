"""The command line the docs give for running the tutorial notebook works with what the dev extra installs."""

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "development.md"  # the development environment page: the notebook's section
PATTERN = r"^(jupyter (\w+) [^\n`]*notebooks/quickstart\.ipynb)$"


def notebook_commands() -> list[tuple[str, str]]:
    """(command line, jupyter subcommand) for each line of the page that runs the tutorial notebook."""
    return re.findall(PATTERN, PAGE.read_text(), flags=re.MULTILINE)


def test_the_documented_command_for_the_notebook_is_installed_by_dev():
    commands = notebook_commands()
    assert commands, f"{PAGE.name} gives no command line that runs the notebook"
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    for _, tool in commands:
        assert any(re.match(rf"{tool}\b", requirement) for requirement in dev), f"[dev] does not install {tool}"

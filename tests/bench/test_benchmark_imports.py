"""The scripts of benchmarks/ import what the package has: they run by hand, so a moved module would otherwise
go unnoticed until someone measures. Every `from tphyolo... import name` in them, at any depth, must resolve."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def package_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of each `from tphyolo... import name` in the script."""
    return [(node.lineno, node.module, alias.name) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tphyolo"
            for alias in node.names]  # fmt: skip


@pytest.mark.parametrize("script", sorted(BENCHMARKS.glob("*.py")), ids=lambda p: p.name)
def test_every_package_import_resolves(script):
    missing = []
    for line, module, name in package_imports(script):
        try:
            owner = importlib.import_module(module)
        except ImportError as error:
            missing.append(f"line {line}: {module} ({error})")
            continue
        if not hasattr(owner, name) and importlib.util.find_spec(f"{module}.{name}") is None:
            missing.append(f"line {line}: {module} has no {name}")
    assert not missing, missing

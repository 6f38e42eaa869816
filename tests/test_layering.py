"""The package's layers import only downwards, read from the source with `ast` (imports inside functions too).

- the library layers (`models`, `data`, `ops`, `metrics`, `legacy`) import none of `engine`, `bench`, `tools`
  and `cli`;
- only the command line (`tools`, `cli`, `__main__`) imports `tools` or `cli`, and no command module imports
  `cli` (the command registry imports them: the other way round is a cycle);
- no module takes names from the package `__init__` (`from tphyolo import X` for an X that is not a module):
  the `__init__` is the public facade and re-exports from `engine`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "tphyolo"
ROOT = Path(__file__).resolve().parents[1] / "src" / PACKAGE
LIBRARY = ("models", "data", "ops", "metrics", "legacy")
COMMAND_LINE = ("tools", "cli", "__main__")

# (importing module, imported module) -> why it is tolerated for now. Each entry must name an import that
# still breaks a rule (test_allowed_breaks_still_exist), so that the list empties as the breaks are fixed.
ALLOWED: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imported_modules(source: str, module: str, *, package: bool) -> set[str]:
    """Every module `source` (the text of `module`) imports anywhere in it, as absolute dotted names;
    `from A import b` gives `A.b` when that is a module of ours or A is the package itself (b may be a name of
    its `__init__`), and `A` otherwise."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                anchor = anchor if package else anchor[:-1]
                base = ".".join(anchor[: len(anchor) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                names.add(submodule if base == PACKAGE or _is_module(submodule) else base)
    return names


def _is_under(name: str, layers: tuple[str, ...]) -> bool:
    return any(name == f"{PACKAGE}.{layer}" or name.startswith(f"{PACKAGE}.{layer}.") for layer in layers)


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (ROOT / relative).with_suffix(".py").is_file() or (ROOT / relative / "__init__.py").is_file()


def rule_broken(importer: str, imported: str) -> str | None:
    """The layering rule that `importer` importing `imported` breaks, or None."""
    if not (imported == PACKAGE or imported.startswith(f"{PACKAGE}.")):
        return None
    if imported == PACKAGE or (imported.count(".") == 1 and not _is_module(imported)):
        return "takes a name from the package __init__; import it from the module that defines it"
    if _is_under(importer, LIBRARY) and _is_under(imported, ("engine", "bench", *COMMAND_LINE)):
        return f"the library layers ({', '.join(LIBRARY)}) import no engine, bench or command-line module"
    if _is_under(imported, ("tools", "cli")) and not _is_under(importer, COMMAND_LINE):
        return "only the command line (tools, cli, __main__) imports tools or cli"
    if _is_under(importer, ("tools",)) and _is_under(imported, ("cli",)):
        return "command modules do not import cli (cli imports them); shared pieces go in tools/"
    return None


def all_breaks() -> dict[tuple[str, str], str]:
    breaks = {}
    for path in sorted(ROOT.rglob("*.py")):
        importer = module_name(path)
        for imported in imported_modules(path.read_text(), importer, package=is_package(path)):
            rule = rule_broken(importer, imported)
            if rule is not None:
                breaks[(importer, imported)] = rule
    return breaks


def test_layers_import_only_downwards():
    found = {pair: rule for pair, rule in all_breaks().items() if pair not in ALLOWED}
    assert not found, "\n".join(f"{a} imports {b}: {rule}" for (a, b), rule in sorted(found.items()))


def test_allowed_breaks_still_exist():
    stale = set(ALLOWED) - set(all_breaks())
    assert not stale, f"fixed, remove from ALLOWED: {sorted(stale)}"


def test_the_scan_sees_every_kind_of_import():
    source = (
        "import tphyolo.engine.loss\n"
        "from tphyolo import __version__, checkpoint\n"
        "from . import boxes\n"
        "from ..bench.timing import time_call\n"
        "def later():\n"
        "    from tphyolo.tools.errors import UsageError\n"
    )
    names = imported_modules(source, "tphyolo.ops.nms", package=False)
    assert names == {
        "tphyolo.engine.loss",
        "tphyolo.__version__",
        "tphyolo.checkpoint",
        "tphyolo.ops.boxes",
        "tphyolo.bench.timing",
        "tphyolo.tools.errors",
    }
    assert imported_modules("from .nms import nms\n", "tphyolo.ops", package=True) == {"tphyolo.ops.nms"}


@pytest.mark.parametrize(
    ("importer", "imported", "broken"),
    [
        ("tphyolo.models.swin", "tphyolo.engine.loss", True),
        ("tphyolo.metrics.coco", "tphyolo.bench.timing", True),
        ("tphyolo.data.loader", "tphyolo.tools.errors", True),
        ("tphyolo.engine.trainer", "tphyolo.tools.train_cmd", True),
        ("tphyolo.bench.attention", "tphyolo.tools.sdpa_probe", True),
        ("tphyolo.tools.bench_cmd", "tphyolo.cli", True),
        ("tphyolo.checkpoint", "tphyolo.__version__", True),
        ("tphyolo.tools.val_cmd", "tphyolo.tools.predict_cmd", False),
        ("tphyolo.cli", "tphyolo.tools.errors", False),
        ("tphyolo.__main__", "tphyolo.cli", False),
        ("tphyolo.engine.evaluate", "tphyolo.metrics.coco", False),
        ("tphyolo.checkpoint", "tphyolo._version", False),
        ("tphyolo.models.swin", "torch.nn", False),
    ],
)
def test_rules(importer, imported, broken):
    assert (rule_broken(importer, imported) is not None) == broken


def test_test_modules_have_unique_names():
    # Test folders are not packages: two test files of one name cannot both be collected in one run.
    root = Path(__file__).parent
    names = [path.name for path in root.rglob("test_*.py")]
    assert sorted({name for name in names if names.count(name) > 1}) == []

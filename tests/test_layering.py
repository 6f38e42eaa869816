"""The package's units import only downwards, read from the source with `ast` (imports inside functions too).

A unit is a top-level package of `tphyolo` (`training`, `infer`, ...) or a module at its root (`flags`, `cli`,
...). The units stand in one order, lowest first (`LAYERS`, drawn in docs/architecture.md); a unit imports only
units of lower layers, never one of its own layer or above, so the units form a DAG:

| layer | units | what they are |
| --- | --- | --- |
| 0 | `errors` | the kinds of error every unit raises (`InputError`: bad input) |
| 1 | `_version`, `cores`, `imports`, `flags`, `user_cache`, `yaml_files` | foundations: import only `errors` |
| 2 | `ops` | boxes, NMS, WBF |
| 3 | `models`, `data` | the model library; datasets, formats, augmentation, loaders |
| 4 | `metrics` | AP and the protocols (yolo, coco, visdrone), tracking metrics |
| 5 | `runtime`, `checkpoint` | process settings, devices, run folders; checkpoint files and their converters |
| 6 | `classify`, `doctor` | the crop-classifier library; what this environment can run, as a report value |
| 7 | `infer` | the inference core and every backend (PyTorch and exported runtimes) |
| 8 | `predict` | sources, the Predictor, results, writers, drawing |
| 9 | `track`, `evaluation` | tracking on top of prediction; validation and scoring |
| 10 | `training`, `analyze` | the trainer, the classifier's training, tuning; video analytics on top of tracking |
| 11 | `export`, `report`, `serve` | file writers and the format table; the html evaluation report; the service |
| 12 | `bench` | benchmarks |
| 13 | `commands` | one module per CLI command: parsing and printing |
| 14 | `cli` | the entry point and command registry |
| 15 | `__main__`, `__init__` | `python -m tphyolo` and the package facade |

Besides: no module takes names from the package `__init__` (`from tphyolo import X` for an X that is not a
module): the `__init__` is the public facade. Inside a unit, no modules import one another in a circle (a piece
two modules share lives below both). A command module (`tphyolo.commands.*`) imports no journal, resume or
process-group module (`COMMAND_FORBIDDEN`: the sharded-run runner and the process group): it parses and
prints, and the library runs.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

PACKAGE = "tphyolo"
ROOT = Path(__file__).resolve().parents[1] / "src" / PACKAGE
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("_version", "cores", "imports", "flags", "user_cache", "yaml_files"),
    ("ops",),
    ("models", "data"),
    ("metrics",),
    ("runtime", "checkpoint"),
    ("classify", "doctor"),
    ("infer",),
    ("predict",),
    ("track", "evaluation"),
    ("training", "analyze"),
    ("export", "report", "serve"),
    ("bench",),
    ("commands",),
    ("cli",),
    ("__main__", "__init__"),
)
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}

# (importing module, imported module) -> why it is tolerated for now. Each entry must name an import that
# still breaks a rule (test_allowed_breaks_still_exist), so that the list empties as the breaks are fixed.
ALLOWED: dict[tuple[str, str], str] = {}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
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


def unit_of(module: str) -> str:
    """The unit of a dotted module name of ours: its top-level package or root module (`__init__` for the
    package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (ROOT / relative).with_suffix(".py").is_file() or (ROOT / relative / "__init__.py").is_file()


def rule_broken(importer: str, imported: str) -> str | None:
    """The layering rule that `importer` importing `imported` breaks, or None."""
    if not (imported == PACKAGE or imported.startswith(f"{PACKAGE}.")):
        return None
    if imported == PACKAGE or (imported.count(".") == 1 and not _is_module(imported)):
        return "takes a name from the package __init__; import it from the module that defines it"
    source, target = unit_of(importer), unit_of(imported)
    if source == target:
        return None
    for unit in (source, target):
        if unit not in LAYER_OF:
            return f"unit {unit!r} has no layer: add it to LAYERS (and docs/architecture.md)"
    if LAYER_OF[target] >= LAYER_OF[source]:
        where = "its own layer" if LAYER_OF[target] == LAYER_OF[source] else "a higher layer"
        return f"{source} (layer {LAYER_OF[source]}) imports {target}, of {where} ({LAYER_OF[target]})"
    return None


def test_every_unit_has_a_layer():
    units = {path.stem if path.parent == ROOT else path.relative_to(ROOT).parts[0] for path in ROOT.rglob("*.py")}
    assert sorted(units - set(LAYER_OF)) == []


def all_breaks(root: Path = ROOT) -> dict[tuple[str, str], str]:
    """Every import of the package under `root` that breaks a rule, with the rule."""
    breaks = {}
    for path in sorted(root.rglob("*.py")):
        importer = module_name(path, root)
        for imported in imported_modules(path.read_text(), importer, package=is_package(path)):
            rule = rule_broken(importer, imported)
            if rule is not None:
                breaks[(importer, imported)] = rule
    return breaks


def test_an_upward_import_planted_in_a_function_of_the_lowest_layer_fails(tmp_path):
    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    flags = copy / "flags.py"
    flags.write_text(flags.read_text() + "\n\ndef _planted():\n    from tphyolo.training.trainer import Trainer\n")
    planted = ("tphyolo.flags", "tphyolo.training.trainer")
    assert all_breaks(copy) == {planted: rule_broken(*planted)}


def test_layers_import_only_downwards():
    found = {pair: rule for pair, rule in all_breaks().items() if pair not in ALLOWED}
    assert not found, "\n".join(f"{a} imports {b}: {rule}" for (a, b), rule in sorted(found.items()))


def test_allowed_breaks_still_exist():
    stale = set(ALLOWED) - set(all_breaks())
    assert not stale, f"fixed, remove from ALLOWED: {sorted(stale)}"


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the package under `root` -> the other modules of that package it imports, anywhere in
    it (a package's `__init__` is the module named like the package)."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    return {
        module: {name for name in imported_modules(path.read_text(), module, package=is_package(path))
                 if name in paths and name != module}
        for module, path in paths.items()
    }  # fmt: skip


def import_cycles(root: Path = ROOT) -> list[tuple[str, ...]]:
    """Each group of modules of the package under `root` that import one another in a circle (every one
    reaches every other through imports), as a sorted tuple; the groups sorted."""
    graph = import_graph(root)
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            for name in graph[todo.pop()] - seen:
                seen.add(name)
                todo.append(name)
        reach[start] = seen
    groups = {tuple(sorted(m for m in reach[start] if start in reach[m])) for start in graph}
    return sorted(group for group in groups if len(group) > 1)


# Modules importing one another in a circle -> why it is tolerated for now. Each must still be a circle
# (test_allowed_circles_still_exist), so that the list empties as the circles are cut.
CYCLES_ALLOWED: dict[tuple[str, ...], str] = {}


def test_no_modules_import_one_another_in_a_circle():
    """A package's modules stand in an order too: a module that two others need lives below both."""
    found = [group for group in import_cycles() if group not in CYCLES_ALLOWED]
    assert not found, "move what they share into a module below them:\n" + "\n".join(" <-> ".join(g) for g in found)


def test_allowed_circles_still_exist():
    stale = set(CYCLES_ALLOWED) - set(import_cycles())
    assert not stale, f"cut, remove from CYCLES_ALLOWED: {sorted(stale)}"


def test_a_circle_planted_in_a_function_is_found(tmp_path):
    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    overlap = copy / "ops" / "overlap.py"  # nmm.py imports overlap.py; overlap.py now imports nmm.py back
    overlap.write_text(overlap.read_text() + "\n\ndef _planted():\n    from tphyolo.ops.nmm import by_score\n")
    assert import_cycles(copy) == sorted([*import_cycles(), ("tphyolo.ops.nmm", "tphyolo.ops.overlap")])
    assert all_breaks(copy) == all_breaks()  # a circle inside one unit breaks no layering rule


def test_the_circle_scan_groups_every_module_of_a_circle(tmp_path):
    package = tmp_path / PACKAGE
    package.mkdir()
    modules = {"__init__": "", "a": "from tphyolo import b\n", "b": "def f():\n    import tphyolo.c\n",
               "c": "from tphyolo.a import x\nfrom tphyolo import d\n", "d": "import tphyolo.d\n"}  # fmt: skip
    for name, source in modules.items():
        (package / f"{name}.py").write_text(source)
    assert import_cycles(package) == [("tphyolo.a", "tphyolo.b", "tphyolo.c")]


# The run machinery a command leaves to the library: the sharded-run runner (its journal, resume checks and
# dealing over ranks: every module under it) and the process group.
COMMAND_FORBIDDEN = ("tphyolo.predict.runner", "tphyolo.runtime.distributed")
# (command module, forbidden module) -> why it is tolerated for now. Each must still be imported
# (test_allowed_command_imports_still_exist), so that the list empties as the commands hand these to the library.
COMMAND_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}


def command_imports(root: Path = ROOT) -> set[tuple[str, str]]:
    """Every (command module, module of COMMAND_FORBIDDEN) import in the package under `root`: a command parses
    and prints; journals, resumes and process groups belong to the library it calls."""
    return {(module, name) for module, names in import_graph(root).items() if module.startswith(f"{PACKAGE}.commands")
            for name in names if any(name == m or name.startswith(f"{m}.") for m in COMMAND_FORBIDDEN)}  # fmt: skip


def test_commands_import_no_journal_distribution_or_resume_module():
    found = command_imports() - set(COMMAND_IMPORTS_ALLOWED)
    assert not found, "let the library run it:\n" + "\n".join(f"{a} imports {b}" for a, b in sorted(found))


def test_allowed_command_imports_still_exist():
    stale = set(COMMAND_IMPORTS_ALLOWED) - command_imports()
    assert not stale, f"gone, remove from COMMAND_IMPORTS_ALLOWED: {sorted(stale)}"


def test_a_forbidden_import_planted_in_a_command_is_found(tmp_path):
    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    doctor = copy / "commands" / "tools" / "doctor.py"
    doctor.write_text(doctor.read_text() + "\n\ndef _planted():\n    from tphyolo.predict.runner import journal\n")
    planted = ("tphyolo.commands.tools.doctor", "tphyolo.predict.runner.journal")
    assert command_imports(copy) == command_imports() | {planted}


def test_the_scan_sees_every_kind_of_import():
    source = (
        "import tphyolo.training.loss\n"
        "from tphyolo import __version__, checkpoint\n"
        "from . import boxes\n"
        "from ..bench.timing import time_call\n"
        "def later():\n"
        "    from tphyolo.errors import UsageError\n"
    )
    names = imported_modules(source, "tphyolo.ops.nms", package=False)
    assert names == {
        "tphyolo.training.loss",
        "tphyolo.__version__",
        "tphyolo.checkpoint",
        "tphyolo.ops.boxes",
        "tphyolo.bench.timing",
        "tphyolo.errors",
    }
    assert imported_modules("from .nms import nms\n", "tphyolo.ops", package=True) == {"tphyolo.ops.nms"}


@pytest.mark.parametrize(
    ("importer", "imported", "broken"),
    [
        ("tphyolo.models.swin", "tphyolo.training.loss", True),
        ("tphyolo.metrics.coco", "tphyolo.bench.timing", True),
        ("tphyolo.data.loader", "tphyolo.runtime.config", True),
        ("tphyolo.models.build", "tphyolo.data.loader", True),
        ("tphyolo.classify.classifier", "tphyolo.training.classifier.fit", True),
        ("tphyolo.infer.backends.openvino", "tphyolo.export.openvino_ir", True),
        ("tphyolo.export.exporter", "tphyolo.bench.export", True),
        ("tphyolo.infer.detector", "tphyolo.classify.relabel", False),
        ("tphyolo.data.loader", "tphyolo.errors", False),
        ("tphyolo.training.trainer", "tphyolo.commands.train", True),
        ("tphyolo.bench.model", "tphyolo.commands.sdpa_probe", True),
        ("tphyolo.commands.tools.bench", "tphyolo.cli", True),
        ("tphyolo.checkpoint.format", "tphyolo.__version__", True),
        ("tphyolo.commands.val", "tphyolo.commands.predict", False),
        ("tphyolo.cli", "tphyolo.errors", False),
        ("tphyolo.__main__", "tphyolo.cli", False),
        ("tphyolo.evaluation.loop", "tphyolo.metrics.coco", False),
        ("tphyolo.checkpoint.format", "tphyolo._version", False),
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


MAX_MODULES_PER_FOLDER = 15
MAX_ROOT_MODULES = 9
MAX_MODULE_LINES = 450


def test_the_package_has_a_readable_shape():
    """No folder holds more than MAX_MODULES_PER_FOLDER modules (a package waiting to be made), and at most
    MAX_ROOT_MODULES modules sit at the package root (`__init__` aside), and no module is longer than
    MAX_MODULE_LINES lines."""
    counts: dict[str, int] = {}
    lines = {str(path.relative_to(ROOT.parent)): len(path.read_text().splitlines()) for path in ROOT.rglob("*.py")}
    assert {name: n for name, n in lines.items() if n > MAX_MODULE_LINES} == {}
    for path in ROOT.rglob("*.py"):
        if path.name != "__init__.py":
            folder = str(path.parent.relative_to(ROOT.parent))
            counts[folder] = counts.get(folder, 0) + 1
    assert {folder: n for folder, n in counts.items() if n > MAX_MODULES_PER_FOLDER} == {}
    assert counts[PACKAGE] <= MAX_ROOT_MODULES


LIVE_TRACKS = re.compile(r"_*live_?tracks?", re.IGNORECASE)  # the table of a tracker's live tracks
SKIP_EMPTY = re.compile(r"skip_empty")


def definitions(folder: Path, kind: type, named: re.Pattern[str]) -> list[str]:
    """`file:name` of each class or function (`kind`: ast.ClassDef, ast.FunctionDef) in the modules under
    `folder` whose whole name matches `named`, sorted; a protocol's stub (a body of `...`) is no definition."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, kind) and named.fullmatch(node.name) and not _is_stub(node):
                found.append(f"{path.relative_to(folder)}:{node.name}")
    return sorted(found)


def _is_stub(node: ast.ClassDef | ast.FunctionDef) -> bool:
    """Whether the body is `...` alone (after a docstring, if any)."""
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    return len(body) == 1 and isinstance(body[0], ast.Expr) and getattr(body[0].value, "value", None) is Ellipsis


def test_the_trackers_share_one_live_track_table_and_one_skip_empty():
    track = ROOT / "track"
    assert definitions(track, ast.ClassDef, LIVE_TRACKS) == ["live.py:LiveTracks"]
    assert definitions(track, ast.FunctionDef, SKIP_EMPTY) == ["live.py:skip_empty"]


def test_a_second_live_track_table_is_found(tmp_path):
    (tmp_path / "a.py").write_text("class LiveTracks:\n    def skip_empty(self, n):\n        return n\n")
    (tmp_path / "b.py").write_text("class _LiveTracks:\n    pass\n\n\nclass Protocol:\n    def skip_empty(self): ...\n")
    assert definitions(tmp_path, ast.ClassDef, LIVE_TRACKS) == ["a.py:LiveTracks", "b.py:_LiveTracks"]
    assert definitions(tmp_path, ast.FunctionDef, SKIP_EMPTY) == ["a.py:skip_empty"]


def test_no_unit_shadows_a_name_of_the_facade():
    """Importing a submodule binds its package as an attribute of `tphyolo`: a unit named like a facade name
    (`tphyolo.train`, `tphyolo.val`, ...) would replace the function once anything imported it."""
    import tphyolo
    import tphyolo.training.trainer  # noqa: F401 - binds tphyolo.training

    facade = ("Predictor", "Results", "val", "train", "Trainer", "TrainConfig")
    units = {unit for layer in LAYERS for unit in layer}
    assert sorted(units & set(facade)) == []
    assert callable(tphyolo.train) and not isinstance(tphyolo.train, type(tphyolo))


MAX_PARAMETERS = 10
# (module, qualified name) -> its parameter count, for a function tolerated over MAX_PARAMETERS for now. Each
# entry must still be that wide (test_wide_functions_allowed_are_still_wide), so the list empties as they narrow.
WIDE_ALLOWED: dict[tuple[str, str], int] = {}


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Every parameter of a function (positional, keyword-only, *args, **kwargs) but self and cls."""
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a]
    return len([name for name in names if name not in ("self", "cls")])


def function_widths(source: str) -> dict[str, int]:
    """The parameter count of every function in `source` by qualified name (`Class.method`, `outer.inner`)."""
    widths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                widths[f"{prefix}{child.name}"] = parameter_count(child)
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return widths


def wide_functions(root: Path = ROOT) -> dict[tuple[str, str], int]:
    """Every function of the package under `root` with more than MAX_PARAMETERS parameters."""
    return {(module_name(path, root), name): n for path in sorted(root.rglob("*.py"))
            for name, n in function_widths(path.read_text()).items() if n > MAX_PARAMETERS}  # fmt: skip


def test_no_function_takes_more_than_ten_parameters():
    found = {key: n for key, n in wide_functions().items() if WIDE_ALLOWED.get(key) != n}
    assert not found, "group parameters that belong together into a frozen dataclass:\n" + "\n".join(
        f"{module}:{name} takes {n}" for (module, name), n in sorted(found.items())
    )


def test_wide_functions_allowed_are_still_wide():
    stale = {key: n for key, n in WIDE_ALLOWED.items() if wide_functions().get(key) != n}
    assert not stale, f"narrowed, update WIDE_ALLOWED: {sorted(stale)}"


def test_the_width_scan_counts_every_kind_of_parameter():
    source = (
        "def f(a, /, b, *args, c, **kw):\n"
        "    def inner(x): ...\n"
        "class K:\n"
        "    def m(self, a, b=1): ...\n"
        "    @classmethod\n"
        "    async def n(cls, *, a): ...\n"
    )
    assert function_widths(source) == {"f": 5, "f.inner": 1, "K.m": 2, "K.n": 1}

"""The shape of a checkout of the package, in numbers: a before/after table for a change of its architecture.

    python benchmarks/architecture_metrics.py                      # this checkout
    python benchmarks/architecture_metrics.py --repo /path/to/other/checkout

Prints, for `<repo>/src/tphyolo`: the modules of each package folder (`__init__.py` aside), the modules over
`--long` lines, the functions over `--wide` parameters (self and cls aside), the groups of modules that import
one another in a circle (imports inside functions count), the line count of each command module
(`tphyolo/commands/**`), and the size of each allow-list of `<repo>/tests/test_layering.py` (every top-level
dict whose name ends in `ALLOWED`; one the file does not have is not printed).

The imports, circles and widths are read with this checkout's `tests/test_layering.py` scan, pointed at the
other checkout's source, so that two checkouts are measured by one rule. Nothing is imported from the measured
source.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to measure (default: this one)")
    parser.add_argument("--long", type=int, default=300, help="a module over this many lines is listed")
    parser.add_argument("--wide", type=int, default=10, help="a function over this many parameters is listed")
    return parser.parse_args(argv)


def layering_scan(package: Path) -> ModuleType:
    """This checkout's `tests/test_layering.py`, its scan pointed at `package` (the folder `tphyolo`)."""
    spec = importlib.util.spec_from_file_location("layering_scan", REPO / "tests" / "test_layering.py")
    scan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scan)
    scan.ROOT = package  # module names and "is this a module" are read against `package` from here on
    return scan


def allow_list_sizes(test_file: Path) -> dict[str, int]:
    """Name -> entry count of each top-level dict literal of `test_file` whose name ends in ALLOWED."""
    sizes = {}
    for node in ast.parse(test_file.read_text()).body:
        if isinstance(node, ast.AnnAssign):
            target = node.target
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        else:
            continue
        if isinstance(target, ast.Name) and target.id.endswith("ALLOWED") and isinstance(node.value, ast.Dict):
            sizes[target.id] = len(node.value.keys)
    return sizes


def lines_of(path: Path) -> int:
    return len(path.read_text().splitlines())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    package = args.repo.resolve() / "src" / "tphyolo"
    if not package.is_dir():
        raise SystemExit(f"{args.repo}: no src/tphyolo here")
    scan = layering_scan(package)
    modules = sorted(package.rglob("*.py"))
    print(f"checkout {args.repo.resolve()}: {len(modules)} modules")

    folders: dict[str, int] = {}
    for path in modules:
        if path.name != "__init__.py":
            folder = str(path.parent.relative_to(package.parent))
            folders[folder] = folders.get(folder, 0) + 1
    print(f"\nmodules per package folder ({len(folders)} folders, most first):")
    for folder, count in sorted(folders.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {count:3d}  {folder}")

    long = [(lines_of(path), str(path.relative_to(package.parent))) for path in modules]
    long = sorted((item for item in long if item[0] > args.long), reverse=True)
    print(f"\nmodules over {args.long} lines: {len(long)}")
    for count, name in long:
        print(f"  {count:4d}  {name}")

    wide = {}
    for path in modules:
        widths = scan.function_widths(path.read_text())
        wide.update({f"{scan.module_name(path, package)}:{name}": n for name, n in widths.items() if n > args.wide})
    print(f"\nfunctions over {args.wide} parameters: {len(wide)}")
    for name, count in sorted(wide.items()):
        print(f"  {count:3d}  {name}")

    cycles = scan.import_cycles(package)
    print(f"\nimport circles (groups of modules importing one another): {len(cycles)}")
    for group in cycles:
        print("  " + " <-> ".join(group))

    commands = [(lines_of(path), str(path.relative_to(package.parent))) for path in modules
                if path.relative_to(package).parts[0] == "commands"]  # fmt: skip
    print(f"\ncommand modules: {len(commands)}, {sum(n for n, _ in commands)} lines")
    for count, name in sorted(commands, reverse=True):
        print(f"  {count:4d}  {name}")

    test_file = args.repo.resolve() / "tests" / "test_layering.py"
    sizes = allow_list_sizes(test_file) if test_file.is_file() else {}
    print(f"\nallow-lists of tests/test_layering.py: {sum(sizes.values())} entries")
    for name, count in sizes.items():
        print(f"  {count:3d}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

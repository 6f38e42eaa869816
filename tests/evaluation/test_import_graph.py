"""The modules of `tphyolo.evaluation` import one another without a circle (imports inside functions and under
TYPE_CHECKING count), read from the source as the layering test reads it."""

from tests.test_layering import ROOT, imported_modules, module_name

PACKAGE = "tphyolo.evaluation"


def import_graph(root=ROOT) -> dict[str, set[str]]:
    """Each module of the package under `root` (the tphyolo folder) -> the modules of the package it imports."""
    modules = {module_name(path, root): path for path in (root / "evaluation").glob("*.py")}
    return {
        name: {m for m in imported_modules(path.read_text(encoding="utf-8"), name, package=path.name == "__init__.py")
               if m in modules and m != name}
        for name, path in modules.items()
    }  # fmt: skip


def a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports in `graph` (its modules in import order, the first repeated last), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return None
        for imported in sorted(graph[node]):
            if (cycle := visit(imported, [*path, node])) is not None:
                return cycle
        done.add(node)
        return None

    return next((cycle for node in sorted(graph) if (cycle := visit(node, [])) is not None), None)


def test_the_evaluation_modules_import_without_a_circle():
    graph = import_graph()
    assert f"{PACKAGE}.loop" in graph and f"{PACKAGE}.writers" in graph[f"{PACKAGE}.loop"]  # the scan sees them
    assert a_cycle(graph) is None, " -> ".join(a_cycle(graph))


def test_a_lazy_import_back_is_a_circle(tmp_path):
    package = tmp_path / "tphyolo" / "evaluation"
    package.mkdir(parents=True)
    (package / "loop.py").write_text("from tphyolo.evaluation import writers\n")
    (package / "writers.py").write_text("def late():\n    from tphyolo.evaluation.loop import evaluate\n")
    (package / "results.py").write_text("")
    graph = import_graph(tmp_path / "tphyolo")
    assert a_cycle(graph) == [f"{PACKAGE}.loop", f"{PACKAGE}.writers", f"{PACKAGE}.loop"]

"""What torch.compile did with a model: its graphs, graph breaks and recompilations, with their reasons.

Read from dynamo's process-wide counters: `reset_compile_counters()` before the compiled calls, then
`compile_report()` after them. A graph break splits the model into several graphs (each boundary runs Python
and loses fusion); a recompilation compiles a frame again because a guard failed (typically a new input size).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class CompileReport:
    """`graphs`: graphs compiled; `graph_breaks`: {reason (first line): count}; `recompilations`:
    {function name: [failed guard, ...]}."""

    graphs: int = 0
    graph_breaks: dict[str, int] = field(default_factory=dict)
    recompilations: dict[str, list[str]] = field(default_factory=dict)

    def format(self) -> str:
        lines = [
            f"torch.compile: {self.graphs} graph(s), {sum(self.graph_breaks.values())} graph break(s), "
            f"{sum(len(v) for v in self.recompilations.values())} recompilation(s)"
        ]
        lines += [f"  graph break x{count}: {reason}" for reason, count in self.graph_breaks.items()]
        for name, reasons in self.recompilations.items():
            lines += [f"  recompiled {name}: {reason}" for reason in reasons]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return asdict(self)


def reset_compile_counters() -> None:
    """Forget what earlier compilations in this process counted."""
    from torch._dynamo.utils import counters, guard_failures

    counters.clear()
    guard_failures.clear()


def compile_report() -> CompileReport:
    """The graphs, graph breaks and recompilations counted since `reset_compile_counters()`."""
    from torch._dynamo.utils import counters, guard_failures

    breaks: dict[str, int] = {}
    for reason, count in counters["graph_break"].items():
        first = str(reason).strip().splitlines()[0] if str(reason).strip() else "(no reason given)"
        breaks[first] = breaks.get(first, 0) + int(count)
    recompiled = {getattr(code, "co_name", str(code)): list(map(str, fails)) for code, fails in guard_failures.items()}
    return CompileReport(int(counters["stats"]["unique_graphs"]), breaks, recompiled)

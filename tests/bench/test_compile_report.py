"""The compile report counts graphs, names graph breaks and recompilations with their reasons."""

import torch

from tphyolo.bench.compile_report import compile_report, reset_compile_counters


def _breaks_once(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    torch._dynamo.graph_break()
    return y + 1


def test_report_names_graph_breaks_and_recompilations():
    torch._dynamo.reset()
    reset_compile_counters()
    compiled = torch.compile(_breaks_once, backend="eager", dynamic=False)
    compiled(torch.ones(3))
    compiled(torch.ones(5))  # a new size: the frames compile again
    report = compile_report()
    assert report.graphs >= 2
    assert sum(report.graph_breaks.values()) >= 1
    assert "_breaks_once" in report.recompilations
    assert any("size mismatch" in reason for reason in report.recompilations["_breaks_once"])
    text = report.format()
    assert text.startswith("torch.compile: ") and "graph break x" in text and "recompiled _breaks_once" in text
    torch._dynamo.reset()


def test_a_clean_compilation_reports_no_break():
    torch._dynamo.reset()
    reset_compile_counters()
    compiled = torch.compile(lambda x: torch.sin(x) * 2, backend="eager")
    compiled(torch.ones(4))
    report = compile_report()
    assert report.graphs == 1 and report.graph_breaks == {} and report.recompilations == {}
    torch._dynamo.reset()

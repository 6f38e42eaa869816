"""Every command's run function has one shape, `run_X(job, *, runtime=None, events=NO_EVENTS)`: the job first,
then keyword-only what it runs on and what it tells its caller (`RunEvents`); no device, callbacks
or progress of its own (the device is the job's spec's, progress an event)."""

from __future__ import annotations

import inspect

import pytest

from tphyolo.analyze.pipeline import run_analyze
from tphyolo.export.exporter import run_export
from tphyolo.predict.run import run_predict
from tphyolo.report.val_run import run_val
from tphyolo.runtime.console import NO_EVENTS, RunEvents
from tphyolo.serve.server import run_serve
from tphyolo.track.run import track_job

RUNS = {run_predict: ("runtime",), track_job: ("runtime",), run_val: ("runtime",), run_analyze: ("runtime",),
        run_serve: ("runtime", "stop"), run_export: ()}  # fmt: skip  # serve's stop: a handle to end it, not an event


@pytest.mark.parametrize("run", list(RUNS), ids=lambda run: run.__name__)
def test_every_run_function_takes_its_job_and_keyword_only_events(run):
    params = list(inspect.signature(run).parameters.values())
    assert params[0].name == "job" and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    rest = {p.name: p for p in params[1:]}
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in rest.values())
    assert sorted(rest) == sorted(("events", *RUNS[run]))
    assert rest["events"].default is NO_EVENTS and "runtime" not in rest or rest["runtime"].default is None


def test_tell_is_quiet_without_a_note():
    heard: list[str] = []
    RunEvents().tell("nobody listens")
    RunEvents(note=heard.append).tell("a warning")
    assert heard == ["a warning"] and RunEvents() == NO_EVENTS and not NO_EVENTS.progress

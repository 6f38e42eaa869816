"""The report of a validation run as one of its outputs: `ReportWriter`, an evaluator (`tphyolo.evaluation.
writers.Evaluator`) that `tphyolo val --report` gives the loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tphyolo.evaluation.loop import EvalResults
from tphyolo.evaluation.writers import Evaluator
from tphyolo.metrics.protocol import ImageResult
from tphyolo.report.data import ReportData
from tphyolo.report.records import Records, plain_settings
from tphyolo.report.writer import report_run


class ReportWriter(Evaluator):
    """`evaluation.json` and `report.html` in `run_dir` (a folder, or a function that returns it, called once the
    run is scored), from every image's detections and ground truth (paths made absolute, so that the report
    reads from any folder); `settings`: what the run was given, listed by the report. Returns the report's
    numbers (ReportData) and the path of report.html."""

    def __init__(self, run_dir: Path | Callable[[], Path], *, settings: Mapping[str, object], max_det: int) -> None:
        self.run_dir, self.settings, self.max_det = run_dir, dict(settings), max_det
        self.images: list[ImageResult] = []

    def reset(self) -> None:
        self.images = []

    def process(self, images: Sequence[ImageResult]) -> None:
        self.images += [replace(r, path=str(Path(r.path).resolve())) for r in images]

    def evaluate(self, results: EvalResults) -> tuple[ReportData, Path]:
        records = Records(protocol=results.protocol, max_det=self.max_det, names=results.names,
                          settings=plain_settings(self.settings), images=tuple(self.images),
                          speed=results.speed)  # fmt: skip
        run_dir = self.run_dir() if callable(self.run_dir) else self.run_dir
        return report_run(records, Path(run_dir))

"""The report of a validation run as one of its outputs: `ReportWriter`, a writer (`tphyolo.evaluation.writers.
Writer`) that `tphyolo val --report` gives the loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tphyolo.evaluation.scoring import METRICS
from tphyolo.evaluation.writers import Writer
from tphyolo.metrics.protocol import ImageResult
from tphyolo.report.data import ReportData
from tphyolo.report.records import Records, plain_settings
from tphyolo.report.writer import report_run


class ReportWriter(Writer):
    """`evaluation.json` and `report.html` in `run_dir` (a folder, or a function that returns it, called once the
    run is scored), from every image's detections and ground truth (paths made absolute, so that the report
    reads from any folder); `settings`: what the run was given, listed by the report. Returns the report's
    numbers (ReportData) and the path of report.html."""

    name = "report"

    def __init__(self, run_dir: Path | Callable[[], Path], *, settings: Mapping[str, object], max_det: int) -> None:
        self.run_dir, self.settings, self.max_det = run_dir, dict(settings), max_det
        self.images: list[ImageResult] = []

    def reset(self) -> None:
        self.images = []

    def process(self, images: Sequence[ImageResult]) -> None:
        self.images += [replace(r, path=str(Path(r.path).resolve())) for r in images]

    def write(self, results: Mapping[str, Any]) -> tuple[ReportData, Path]:
        scored = results[METRICS]
        records = Records(protocol=scored.protocol, max_det=self.max_det, names=scored.names,
                          settings=plain_settings(self.settings), images=tuple(self.images),
                          speed=scored.speed)  # fmt: skip
        run_dir = self.run_dir() if callable(self.run_dir) else self.run_dir
        return report_run(records, Path(run_dir))

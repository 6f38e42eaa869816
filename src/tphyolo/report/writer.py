"""Write an evaluation report into a run folder: `report.html`, its pictures in `report_files/`, and
`report.json` (the numbers of the page, as `val --json` writes them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.report.data import ReportData, build_report
from tphyolo.report.figures import write_figures
from tphyolo.report.gallery import write_galleries
from tphyolo.report.html import render_html
from tphyolo.report.records import Records, load_records, save_records

REPORT_NAME = "report.html"
FILES_NAME = "report_files"
JSON_NAME = "report.json"


def write_report(data: ReportData, run_dir: Path, *, title: str = "tphyolo evaluation report") -> Path:
    """Write the report of `data` into `run_dir` (relative image paths are read from there), replacing an
    earlier one; returns the path of `report.html`."""
    run_dir = Path(run_dir)
    files_dir = run_dir / FILES_NAME
    if files_dir.exists():
        shutil.rmtree(files_dir)
    figures = write_figures(data, files_dir)
    galleries = write_galleries(data, files_dir, run_dir)
    write_text_atomic(run_dir / JSON_NAME, json.dumps(data.as_json(), indent=2))
    path = run_dir / REPORT_NAME
    write_text_atomic(path, render_html(data, figures, galleries, FILES_NAME, title=title))
    return path


def report_run(records: Records, run_dir: Path) -> tuple[ReportData, Path]:
    """Save `records` as the run's `evaluation.json` and write its report beside it (what `val --report` and
    `eval --report` do); returns the report's data and the path of `report.html`."""
    save_records(run_dir, records)
    data = build_report(records)
    return data, write_report(data, run_dir)


def rebuild_report(run_dir: Path) -> Path:
    """Rebuild the report of `run_dir` from its `evaluation.json`; returns the path of `report.html`."""
    records = load_records(run_dir)
    return write_report(build_report(records), run_dir)

"""`tphyolo report RUN_DIR`: rebuild the evaluation report of a run folder from its saved records.

The records (`evaluation.json`, `tphyolo.report.records`) are written by `tphyolo val --report` and
`tphyolo eval --report DIR`; the report is `RUN_DIR/report.html` with its pictures in `RUN_DIR/report_files/`
and its numbers in `RUN_DIR/report.json`.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="run folder holding evaluation.json")


def run(args: argparse.Namespace) -> int:
    from tphyolo.report.writer import rebuild_report  # lazy: imports torch; 'tphyolo report -h' must not

    path = rebuild_report(args.run_dir)
    print(f"report in {path}")
    return 0

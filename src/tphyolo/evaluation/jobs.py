"""What one run of `tphyolo val` (`ValJob`) is asked to do, as plain data. The module imports nothing heavy, so
that building the command line stays light; `tphyolo.report.val_run.run_val` runs it (in the report's layer:
it may write a report).

    run_val(ValJob("best.pt", "visdrone", ValConfig(protocol="visdrone"), report=True))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tphyolo.evaluation.settings import ValConfig
from tphyolo.infer.config import VALIDATION, InferenceConfig
from tphyolo.runtime.run_dir import OutputDir

VAL_PROJECT = "runs/val"


@dataclass(frozen=True)
class ValJob:
    """One run of `tphyolo val`: `weights` (a checkpoint, an exported model or a model) scored on `data` by
    `config` (`ValConfig`: the split, protocol, workers, files written, slicing, classifier; its `save_dir` is
    the run's), with the detector's `inference` settings; `report`: the html evaluation report and its records
    in the run folder; `json`: a file the numbers are written to (with `report`, the report's numbers, which
    hold the plain ones). The run folder is `output`'s (under VAL_PROJECT by default), made once the data are
    loaded, so that a run failing before leaves none."""

    weights: Any
    data: str | Path
    config: ValConfig = field(default_factory=ValConfig)
    inference: InferenceConfig = VALIDATION
    report: bool = False
    json: Path | None = None
    output: OutputDir = field(default_factory=OutputDir)

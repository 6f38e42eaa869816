"""What one analysis run is asked to do (`AnalyzeJob`): the lines and zones with one input, the tracker, the
analytics' settings, the detector's and where the run folder goes. Each field is also a `tphyolo analyze` flag;
the module imports nothing heavy, so that building the command line stays light.
`tphyolo.analyze.pipeline.run_analyze` runs it.

    run_analyze(AnalyzeJob(AnalyzeInputs(lines="lines.yaml", tracks=Path("runs/track/exp/visdrone"))))
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tphyolo.analyze.config import AnalyzeConfig, AnalyzeInputs, AnalyzeOutputs, AnalyzeTracking
from tphyolo.infer.config import InferenceConfig
from tphyolo.runtime.run_dir import OutputDir
from tphyolo.track.job import TRACK_CONF

DEFAULT_PROJECT = "runs/analyze"


@dataclass(frozen=True)
class AnalyzeJob:
    """One run of `tphyolo analyze`: its `inputs` (the lines and zones and one of a detector, detection files or
    track files: `check_one_input`, checked when they are made), the `tracking` (tracker and camera-motion
    estimate), the analytics' `config`, the `outputs` besides the tables, the detector's `inference` settings
    (its `conf` defaults to TRACK_CONF, as `tphyolo track`'s) and where the run folder goes (`output`, under
    DEFAULT_PROJECT by default)."""

    inputs: AnalyzeInputs
    tracking: AnalyzeTracking = field(default_factory=AnalyzeTracking)
    config: AnalyzeConfig = field(default_factory=AnalyzeConfig)
    outputs: AnalyzeOutputs = field(default_factory=AnalyzeOutputs)
    inference: InferenceConfig = field(default_factory=lambda: InferenceConfig(conf=TRACK_CONF))
    output: OutputDir = field(default_factory=OutputDir)

"""What one analysis run is asked to do (`AnalyzeJob`): the lines and zones with one input (a detector,
`DetectorSpec`, detection files or track files), the tracker, the analytics' settings and where the run folder
goes. Each field is also a `tphyolo analyze` flag;
the module imports nothing heavy, so that building the command line stays light.
`tphyolo.analyze.pipeline.run_analyze` runs it.

    run_analyze(AnalyzeJob(AnalyzeInputs(lines="lines.yaml", tracks=Path("runs/track/exp/visdrone"))))
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tphyolo.analyze.config import AnalyzeConfig, AnalyzeInputs, AnalyzeOutputs, AnalyzeTracking, check_one_input
from tphyolo.infer.spec import DetectorSpec
from tphyolo.runtime.run_dir import OutputDir

DEFAULT_PROJECT = "runs/analyze"


@dataclass(frozen=True)
class AnalyzeJob:
    """One run of `tphyolo analyze`: its `inputs` (the lines and zones and what to run on), the `detector`
    (`DetectorSpec`, run on `inputs.source`; None to read `inputs.detections` or `inputs.tracks`: one of the
    three, `check_one_input`, checked when the job is made; its runtime and device are the run's unless it names
    them; `tphyolo analyze` gives it conf TRACK_CONF, as `tphyolo track` does), the `tracking` (tracker and
    camera-motion estimate), the analytics' `config`, the `outputs` besides the tables and where the run folder
    goes (`output`, under DEFAULT_PROJECT by default)."""

    inputs: AnalyzeInputs
    detector: DetectorSpec | None = None
    tracking: AnalyzeTracking = field(default_factory=AnalyzeTracking)
    config: AnalyzeConfig = field(default_factory=AnalyzeConfig)
    outputs: AnalyzeOutputs = field(default_factory=AnalyzeOutputs)
    output: OutputDir = field(default_factory=OutputDir)

    def __post_init__(self) -> None:
        inputs = self.inputs
        check_one_input(detector=self.detector is not None, source=inputs.source, detections=inputs.detections,
                        tracks=inputs.tracks)  # fmt: skip

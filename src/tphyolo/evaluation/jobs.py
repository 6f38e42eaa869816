"""What one run of `tphyolo val` (`ValJob`) or of `tphyolo eval` (`EvalJob`) is asked to do, as plain data. The
module imports nothing heavy, so that building the command lines stays light; `tphyolo.report.val_run.run_val`
and `tphyolo.report.eval_run.run_eval` run them (in the report's layer: either may write a report).

    detector = DetectorSpec("best.pt", inference=VALIDATION)  # tphyolo.infer.config.VALIDATION: val's defaults
    run_val(ValJob(detector, "visdrone", ValConfig(protocol="visdrone"), report=True))
    run_eval(EvalJob(gt=Path("VisDrone/annotations"), pred=Path("runs/predict/exp/visdrone")))
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from tphyolo.data.mot.sequences import TRACK_FORMATS
from tphyolo.errors import InputError
from tphyolo.evaluation.settings import ValConfig
from tphyolo.flags import check_field_types, flag, setting_name
from tphyolo.infer.spec import DetectorSpec
from tphyolo.metrics.registry import PROTOCOLS, VISDRONE_TXT, saved_format
from tphyolo.runtime.run_dir import OutputDir

VAL_PROJECT = "runs/val"
EVAL_TASKS = ("detect", "track", "count")
DETECTION_ONLY = ("protocol", "images", "report", "save_gt")  # EvalJob fields that score detections alone


@dataclass(frozen=True)
class ValJob:
    """One run of `tphyolo val`: the `detector` (`DetectorSpec`: one checkpoint, exported model or model, with
    its settings: inference, as VALIDATION for `tphyolo val`'s defaults, slicing, crop classifier; its runtime
    and device are the run's unless it names them) scored on `data` by `config` (`ValConfig`: the split,
    protocol, workers, files written; its `save_dir` is the run's); `report`: the html evaluation report and
    its records in the run folder; `json`: a file the numbers are written to (with `report`, the report's numbers, which
    hold the plain ones). The run folder is `output`'s (under VAL_PROJECT by default), made once the data are
    loaded, so that a run failing before leaves none."""

    detector: DetectorSpec
    data: str | Path
    config: ValConfig = field(default_factory=ValConfig)
    report: bool = False
    json: Path | None = None
    output: OutputDir = field(default_factory=OutputDir)


@dataclass(frozen=True)
class EvalJob:
    """One run of `tphyolo eval` (each field is also its flag): `task` detect scores the detections of `pred`
    against `gt` by `protocol` (or only writes `gt`'s COCO json to `save_gt`), track scores saved tracks against
    `gt` or a video data set's `split` (`data`), count scores an analyze run's counts against those of the true
    tracks `gt` through `lines`. Paths may be given as str. ValueError, in the flags' words, for settings that
    do not go together."""

    task: str = flag("detect", "--task", choices=EVAL_TASKS, help="what --pred holds")
    gt: Path | None = flag(None, "--gt", help="folder of VisDrone annotation txt, COCO json, or GeoJSON (map "
                           "units); tracks: a folder")  # fmt: skip
    pred: Path | None = flag(None, "--pred", help="folder of VisDrone result txt, COCO results json or GeoJSON "
                             "(optional: --save-gt)")  # fmt: skip
    protocol: str = flag("visdrone", "--protocol", choices=tuple(PROTOCOLS), help="scoring rules")
    images: Path | None = flag(None, "--images", help="image folder for sizes (default: images/ beside --gt)")
    json: Path | None = flag(None, "--json", help="write the numbers (percent) to this json file")
    report: Path | None = flag(
        None, "--report", metavar="DIR",
        help="write evaluation.json and the html report (report.html) into DIR (VisDrone txt inputs); "
        "'tphyolo report DIR' rebuilds it",
    )  # fmt: skip
    save_gt: Path | None = flag(None, "--save-gt", metavar="PATH",
                                help="write the COCO dataset json of a VisDrone --gt folder to PATH")  # fmt: skip
    data: str | None = flag(None, "--data", help="a data set (yaml or built-in name): VisDrone folders are read "
                            "with its class names and category table (default: the data.yaml that declares --gt, "
                            "else VisDrone's); --task track: a video data set whose --split ground truth to use",
                            )  # fmt: skip
    # --task track
    format: str = flag("visdrone-mot", "--format", choices=TRACK_FORMATS, help="layout and rules of --gt and --pred")
    split: str = flag("val", "--split", choices=("train", "val", "test"), help="--data split")
    # --task count
    lines: str | None = flag(None, "--lines", help="the lines and zones yaml the run counted with")
    source: str | None = flag(None, "--source", help="the frames, for the camera motion of the true tracks (a "
                              "moving camera)")  # fmt: skip

    def __post_init__(self) -> None:
        for name in ("gt", "pred", "images", "json", "report", "save_gt"):  # Python callers may give str
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, Path(getattr(self, name)))
        check_field_types(self)  # types, choices and bounds
        if self.task == "track":
            defaults = {f.name: f.default for f in fields(self)}
            given = [setting_name(self, n) for n in DETECTION_ONLY if getattr(self, n) != defaults[n]]
            if given:
                raise InputError(f"{', '.join(given)} score detections; --task track does not take them")
            if self.pred is None or (self.gt is None) == (self.data is None):
                raise InputError("--task track needs --pred and one of --gt or --data")
        elif self.task == "count":
            if self.pred is None or self.gt is None or self.lines is None:
                raise InputError("--task count needs --pred (an analyze run), --gt (true track files) and --lines")
        else:
            self._check_detect()

    def _check_detect(self) -> None:
        if self.gt is None:
            raise InputError("--gt is required")
        if self.save_gt is not None and saved_format(self.gt) != VISDRONE_TXT:
            raise InputError(f"--save-gt writes the COCO json of a VisDrone annotation folder; --gt {self.gt} is one")
        if self.pred is None and self.save_gt is None:
            raise InputError("--pred is required (unless --save-gt only writes the ground truth)")

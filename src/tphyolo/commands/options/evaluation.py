"""The flags of `tphyolo eval` (`EvalFlags`): what is scored against what, by which rules, and where the numbers
go; `EVAL_FLAG_GROUPS` puts those of `--task track` and `--task count` under their own headings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tphyolo.data.mot.sequences import TRACK_FORMATS
from tphyolo.flags import flag
from tphyolo.metrics.registry import PROTOCOLS


@dataclass(frozen=True)
class EvalFlags:
    """`--task detect` scores --pred against --gt by --protocol; `track` and `count` take their own flags."""

    task: str = flag("detect", "--task", choices=("detect", "track", "count"), help="what --pred holds")
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


DETECTION_ONLY = ("protocol", "images", "report", "save_gt")  # flags --task track does not take
EVAL_FLAG_GROUPS = {  # heading (None: the command's own) -> the EvalFlags fields under it
    None: ("task", "gt", "pred", "data", "protocol", "images", "json", "report", "save_gt"),
    "--task track": ("format", "split"),
    "--task count: --pred an analyze run (counts.json), --gt its true tracks": ("lines", "source"),
}

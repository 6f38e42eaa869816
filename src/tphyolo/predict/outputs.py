"""What a prediction run writes into its folder: a settings dataclass whose fields are also `tphyolo predict`
flags. It imports nothing heavy, so that building the command line stays light."""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.flags import check_field_types, flag


@dataclass(frozen=True)
class OutputSettings:
    """The outputs of a run folder besides the journal: annotated images/videos (`save_img`), YOLO txt per
    image (`save_txt`, with scores: `save_conf`), VisDrone submission txt (`save_visdrone`), COCO results json
    (`save_json`, numbered by the image ids of the COCO dataset json `coco_gt` when given), crops, and the
    pre-annotations of labelling tools (`save_cvat`, `save_label_studio`: one file for the whole run)."""

    save_img: bool = flag(True, "--no-save-img", "--nosave", help="do not write annotated images/videos")
    save_txt: bool = flag(False, "--save-txt", help="YOLO txt per image (labels/)")
    save_conf: bool = flag(False, "--save-conf", help="scores in --save-txt files")
    save_visdrone: bool = flag(False, "--save-visdrone", help="VisDrone submission txt per image (visdrone/)")
    save_json: bool = flag(False, "--save-json", help="COCO results json (predictions.json)")
    coco_gt: str | None = flag(
        None,
        "--coco-gt",
        metavar="PATH",
        help="COCO dataset json whose image ids --save-json uses (matched by file name without suffix)",
    )
    save_crop: bool = flag(False, "--save-crop", help="each detection's image region (crops/CLASS/)")
    save_cvat: bool = flag(False, "--save-cvat", help="CVAT for images 1.1 XML of every image's detections with "
                           "scores, to correct in CVAT and train on its export (annotations.xml)")  # fmt: skip
    save_label_studio: bool = flag(False, "--save-label-studio", help="Label Studio tasks with every image's "
                                   "detections as predictions of the model (label-studio.json)")  # fmt: skip

    def __post_init__(self) -> None:
        check_field_types(self)

    @property
    def tool_flags(self) -> list[str]:
        """The flags of the labelling tools' files asked for: written once, when the run ends."""
        return [f for f, on in (("--save-cvat", self.save_cvat), ("--save-label-studio", self.save_label_studio)) if on]

    def problems(self) -> list[str]:
        """Settings that have no effect as given, each a line saying what to do."""
        found = []
        if self.save_conf and not self.save_txt:
            found.append("--save-conf adds scores to the --save-txt files; add --save-txt or drop it")
        if self.coco_gt is not None and not self.save_json:
            found.append("--coco-gt numbers the images of --save-json; add --save-json or drop it")
        return found

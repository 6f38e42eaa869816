"""How predicted boxes are drawn (labels, scores, line width): a settings dataclass whose fields are also
`tphyolo predict` flags. It imports nothing heavy, so that building the command line stays light."""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.flags import Bounds, check_field_types, flag

MAX_LINE_WIDTH = 32767  # the thickest line OpenCV draws


@dataclass(frozen=True)
class DrawStyle:
    """How detections are drawn: boxes only (`hide_labels`), labels without scores (`hide_conf`), and the
    box line width in pixels (None: from the image size). Each field is also a command-line flag."""

    hide_labels: bool = flag(False, "--hide-labels", help="draw boxes without class names or scores")
    hide_conf: bool = flag(False, "--hide-conf", help="draw class names without scores")
    line_width: int | None = flag(
        None,
        "--line-width",
        "--line-thickness",
        metavar="PX",
        help="box line width (default: from image size)",
        bounds=Bounds(1, MAX_LINE_WIDTH),
    )

    def __post_init__(self) -> None:
        check_field_types(self)  # types and the flags' bounds


DEFAULT_STYLE = DrawStyle()

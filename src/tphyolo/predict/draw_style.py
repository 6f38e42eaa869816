"""How predicted boxes are drawn (labels, scores, line width): a settings dataclass whose fields are also
`tphyolo predict` flags. It imports nothing heavy, so that building the command line stays light."""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.flags import flag


@dataclass(frozen=True)
class DrawStyle:
    """How detections are drawn: boxes only (`hide_labels`), labels without scores (`hide_conf`), and the
    box line width in pixels (None: from the image size). Each field is also a command-line flag."""

    hide_labels: bool = flag(False, "--hide-labels", help="draw boxes without class names or scores")
    hide_conf: bool = flag(False, "--hide-conf", help="draw class names without scores")
    line_width: int | None = flag(
        None, "--line-width", "--line-thickness", metavar="PX", help="box line width (default: from image size)"
    )

    def __post_init__(self) -> None:
        if self.line_width is not None and self.line_width < 1:
            raise ValueError(f"--line-width must be at least 1 pixel, got {self.line_width}")


DEFAULT_STYLE = DrawStyle()

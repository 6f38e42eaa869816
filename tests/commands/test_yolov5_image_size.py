"""YOLOv5's `--img-size H W` / `--imgsz H W` on every command that replaces one of its scripts."""

import pytest

from tphyolo.cli import build_parser
from tphyolo.commands.options.yolov5 import YOLOV5_SCRIPTS


@pytest.mark.parametrize("command", sorted(YOLOV5_SCRIPTS))
@pytest.mark.parametrize("spelling", ["--img-size", "--imgsz"])
def test_two_equal_numbers_are_one_image_size(command, spelling):
    extra = {
        "val": ["--weights", "w.pt", "--data", "d.yaml"],
        "predict": ["--weights", "w.pt"],
        "export": ["--weights", "w.pt"],
    }.get(command, [])
    args = build_parser([command]).parse_args([command, *extra, spelling, "416", "416"])
    assert args.imgsz == 416

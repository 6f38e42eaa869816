"""The flags of `tphyolo predict` that name what it runs on and how it goes (`PredictFlags`): the source, the
weights, the video frame stride and `--resume`. The outputs are `OutputSettings` and `DrawStyle`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tphyolo.flags import AT_LEAST_ONE, Bounds, flag


@dataclass(frozen=True)
class PredictFlags:
    """source and weights are required unless `resume` names the run folder whose saved flags give them."""

    source: str | None = flag(None, "--source", help="image, folder, glob, .txt list of files, video, webcam index "
                              "(0) or rtsp/rtmp/http(s) video URL (required unless --resume)")  # fmt: skip
    weights: tuple[str, ...] | None = flag(
        None, "--weights", help="checkpoint(s) or exported model(s) (.onnx, OpenVINO, .torchscript); several form an "
        "ensemble (required unless --resume)",
    )  # fmt: skip
    model_weights: tuple[float, ...] | None = flag(None, "--model-weights", bounds=Bounds(0),
                                                   help="WBF weight of each model")  # fmt: skip
    vid_stride: int = flag(1, "--vid-stride", bounds=AT_LEAST_ONE, metavar="N",
                           help="read every N-th frame of videos and streams")  # fmt: skip
    resume: Path | None = flag(None, "--resume", metavar="RUN_DIR", help="continue an interrupted run in RUN_DIR "
                               "with its settings: finished outputs are kept, the rest done")  # fmt: skip

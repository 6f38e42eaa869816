"""The settings of a `tphyolo bench` suite: which benchmarks, and the sizes each one runs at. Light (no torch),
so that the command line can name them."""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE, check_field_types, flag, imgsz_flag

BENCHMARKS = ("model", "data", "predict", "startup", "serve")


@dataclass(frozen=True)
class BenchSettings:
    """What to run (`what`, in order, each once) and at which sizes. `quick`: tiny sizes and one repeat, to
    check that it runs. None for `warmup`, `repeats`, `variants`, `data_batches`: each
    benchmark's own default (on the device it runs on)."""

    what: tuple[str, ...]
    quick: bool = flag(False, "--quick", help="tiny sizes and one repeat: checks that it runs")
    warmup: int | None = flag(None, "--warmup", bounds=NON_NEGATIVE, help="untimed calls before timing (default 1)")
    repeats: int | None = flag(None, "--repeats", bounds=AT_LEAST_ONE,
                               help="timed calls; the median is reported (default 3; 5 for predict)")  # fmt: skip
    batch: int = flag(2, "--batch", bounds=AT_LEAST_ONE, help="batch size")
    # model, predict, startup
    model: str = flag("tph-yolov5s", "--model", help="built-in model name")
    img: int = imgsz_flag(640, bounds=IMGSZ_BOUNDS, help="image size")
    variants: tuple[str, ...] | None = flag(
        None, "--variants", sep=",",
        help="eager,channels_last,amp,compile,amp+compile,decided (default: eager,channels_last on CPU; "
        "eager,channels_last,amp,amp+compile on CUDA)",
    )  # fmt: skip
    model_modes: tuple[str, ...] = flag(("train", "infer"), "--model-modes", sep=",", help="train,infer")
    backends: tuple[str, ...] = flag(
        ("onnxruntime", "openvino"), "--backends", sep=",",
        help="onnxruntime,openvino,torchscript,pt2 and the INT8 files onnxruntime-int8,openvino-int8 (calibrated on "
        "--data's train split), each against our model in PyTorch eager fp32, fused",
    )  # fmt: skip
    tta: bool = flag(False, "--tta", help="also time predict with 8-pass TTA + WBF on one image")
    tta_img: int = flag(1536, "--tta-img", bounds=IMGSZ_BOUNDS, help="TTA image width, pixels")
    export_dir: str | None = flag(None, "--export-dir", metavar="DIR",
                                  help="where the exports go (default: a temporary folder)")  # fmt: skip
    # serve
    weights: tuple[str, ...] | None = flag(None, "--weights", help="weights the servers load (required for bench "
                                           "serve)")  # fmt: skip
    url: str | None = flag(None, "--url", help="a running service on this machine (http://127.0.0.1:PORT) instead")
    # serve's sizes: about two minutes on a busy 2-core CPU at 640 px (1,4,16,64 x 200 took over 150 s there)
    concurrency: tuple[int, ...] = flag((1, 16), "--concurrency", sep=",", bounds=AT_LEAST_ONE,
                                        help="concurrent clients, one level each")  # fmt: skip
    requests: int = flag(48, "--requests", bounds=AT_LEAST_ONE, help="per level and server")
    image: str | None = flag(None, "--image", help="the image sent (default: a generated 1280x720 scene)")
    # data (and predict's INT8 calibration, startup)
    workers: tuple[int, ...] = flag((0, 1, 2), "--workers", sep=",", bounds=NON_NEGATIVE, help="loader worker counts")
    data: str = flag("synthetic", "--data", help="dataset yaml or built-in name for bench data and INT8 calibration")
    data_batches: int | None = flag(None, "--data-batches", bounds=AT_LEAST_ONE,
                                    help="batches per bench data run (default 8)")  # fmt: skip

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds

    def pick(self, explicit: int | None, normal: int, tiny: int) -> int:
        """`explicit` when given, else `tiny` under `quick` and `normal` otherwise."""
        return explicit if explicit is not None else (tiny if self.quick else normal)

"""The settings of a `tphyolo bench` suite: which benchmarks, and the sizes each one runs at. Light (no torch),
so that the command line can name them."""

from __future__ import annotations

from dataclasses import dataclass

BENCHMARKS = ("attention", "model", "wbf", "eval", "data", "predict", "startup", "serve")


@dataclass(frozen=True)
class BenchSettings:
    """What to run (`what`, in order, each once) and at which sizes. `quick`: tiny sizes and one repeat, to
    check that it runs. None for `warmup`, `repeats`, `dtypes`, `variants`, `images`, `data_batches`: each
    benchmark's own default (on the device it runs on)."""

    what: tuple[str, ...]
    quick: bool = False
    warmup: int | None = None  # untimed calls (default 1)
    repeats: int | None = None  # timed calls; the median is reported (default 3; 5 for predict and wbf)
    batch: int = 2
    # attention
    blocks: tuple[str, ...] = ("c3tr", "c3str", "clla")
    scales: tuple[str, ...] = ("s",)
    sizes: tuple[int, ...] = (640, 1536)
    modes: tuple[str, ...] = ("eval", "train")
    dtypes: tuple[str, ...] | None = None
    # model, predict, startup
    model: str = "tph-yolov5s"
    img: int = 640
    variants: tuple[str, ...] | None = None
    model_modes: tuple[str, ...] = ("train", "infer")
    backends: tuple[str, ...] = ("onnxruntime", "openvino")
    baselines: tuple[str, ...] = ("ours",)
    tta: bool = False
    tta_img: int = 1536
    export_dir: str | None = None
    # serve
    weights: tuple[str, ...] | None = None
    url: str | None = None
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    requests: int = 200
    image: str | None = None
    # wbf, eval, data
    workers: tuple[int, ...] = (0, 1, 2)
    images: int | None = None
    clock: str = "wall"
    data: str = "synthetic"
    data_batches: int | None = None

    def pick(self, explicit: int | None, normal: int, tiny: int) -> int:
        """`explicit` when given, else `tiny` under `quick` and `normal` otherwise."""
        return explicit if explicit is not None else (tiny if self.quick else normal)

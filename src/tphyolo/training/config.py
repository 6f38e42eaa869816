"""TrainConfig: every setting of a training run, as plain data saved with its checkpoints (args.yaml).

Each field that is on the command line declares its flag here (`tphyolo.flags.flag`: names, default, choices,
help); `tphyolo train` derives its parser from these fields. Adding a train setting is one field in this file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.data.scan_options import scan_cache_flag
from tphyolo.errors import InputError
from tphyolo.flags import (
    AT_LEAST_ONE,
    FRACTION,
    NON_NEGATIVE,
    SEED,
    check_field_types,
    checked,
    flag,
    imgsz_flag,
    setting_name,
)
from tphyolo.infer.config import MAX_DET, MERGE_METHODS, NMS_IOU, VAL_CONF

OPTIMIZERS = ("SGD", "Adam", "AdamW")  # the optimisers `training.optim.rules.build_optimizer` builds
CACHE_CHOICES = (None, "ram", "disk")
IGNORE_MODES = ("fill", "keep")


@dataclass(frozen=True)
class TrainResume:
    """Which run `tphyolo train --resume` continues (None: a new run); its field is also the flag."""

    resume: str | None = flag(None, "--resume", const="", metavar="PATH",
                              help="continue a run: the latest */weights/last.pt under --project, or PATH")  # fmt: skip


@dataclass(frozen=True)
class TrainConfig:
    """A training run. The defaults are the built-in quick job: a small TPH model on the synthetic set.

    hyp, optimizer, nominal_batch: None takes the dataset's recipe (`training.recipes`: synthetic sets hyp
        synthetic, AdamW, 8; VisDrone hyp visdrone, Adam, 64; other data scratch-low, SGD, 64); the trainer
        resolves them once, and what it saves (args.yaml, checkpoints) holds the resolved values.
    batch: images per process per step; gradients accumulate over batches until an optimiser step has seen
        about `nominal_batch` images.
    label_smoothing: None takes the hyp file's value (0 when it has none); a number, 0 included, replaces it.
    warmup_min_steps: minimum warm-up length in batches (the original used 1000; later YOLOv5 100).
    val_conf, val_iou, max_det: the validation after each epoch (the shared scoring defaults).
    tile: train on windows of `imgsz` px cut from the full images at their own resolution
        (`tphyolo.data.tiles.TileWindows`), and validate as sliced inference on the full val images with windows
        of that size merged by `merge`; the checkpoints record both, and inference on them slices so by default.
    """

    data: str = flag("synthetic", "--data", help="dataset yaml, image folder, or 'synthetic' / 'visdrone'")
    datasets_dir: str | None = flag(
        None, "--datasets-dir", help="folder that built-in data configs' relative paths start from (./datasets)"
    )
    model: str = flag("tph-yolov5n", "--model", "--cfg", help="model yaml or built-in name")
    weights: str | None = flag(None, "--weights", help="checkpoint to start from (ours, TPH-YOLOv5 or YOLOv5 .pt)")
    hyp: str | None = flag(
        None, "--hyp", help="hyp yaml or built-in name (visdrone, scratch-low, ...); default: the dataset's recipe"
    )
    imgsz: int = imgsz_flag(320, help="train size, pixels (rounded up to a stride multiple)", bounds=IMGSZ_BOUNDS)
    batch: int = flag(8, "--batch", "--batch-size", help="images per process per batch", bounds=AT_LEAST_ONE)
    nominal_batch: int | None = flag(
        None,
        "--nbs",
        "--nominal-batch",
        help="accumulate gradients until a step has seen this many images; default: the dataset's recipe",
        bounds=AT_LEAST_ONE,
    )
    epochs: int = flag(20, "--epochs", help="training epochs", bounds=AT_LEAST_ONE)
    workers: int = flag(
        2, "--workers", help="data loader processes per training process (at most the CPU cores)", bounds=NON_NEGATIVE
    )
    optimizer: str | None = flag(
        None, "--optimizer", help="optimiser; default: the dataset's recipe", choices=OPTIMIZERS
    )
    cos_lr: bool = flag(False, "--cos-lr", help="cosine learning-rate decay (default: linear)")
    label_smoothing: float | None = flag(
        None,
        "--label-smoothing",
        help="class label smoothing epsilon; replaces the hyp file's value, 0 included",
        bounds=FRACTION,
    )
    cache: str | None = flag(
        None,
        "--cache",
        const="ram",
        choices=[c for c in CACHE_CHOICES if c],
        help="cache images: ram (also a bare --cache) or disk",
    )
    scan_cache: bool = scan_cache_flag()
    rect: bool = flag(False, "--rect", help="rectangular training batches (no mosaic shuffle)")
    tile: bool = flag(
        False, "--tile", help="train on --img px windows of the full images at their own resolution (never "
        "resized) and validate sliced, as predict --slice infers; inference on the weights then slices by default",
    )  # fmt: skip
    merge: str = flag("wbf", "--merge", choices=MERGE_METHODS,
                      help="with --tile: how the validation merges the slices (saved for inference)")  # fmt: skip
    multi_scale: bool = flag(False, "--multi-scale", help="vary the image size +/- 50%% per batch")
    sync_bn: bool = flag(False, "--sync-bn", help="SyncBatchNorm across processes (DDP on GPUs only)")
    freeze: tuple[int, ...] = flag(
        (0,),
        "--freeze",
        help="freeze the first N layers (one number) or the layers listed (several numbers)",
        bounds=NON_NEGATIVE,
    )
    single_cls: bool = flag(False, "--single-cls", help="train every class as one class, 'item'")
    val: bool = flag(True, "--noval", help="validate the final weights only, not after every epoch")
    save: bool = flag(True, "--nosave", help="write the checkpoints at the end of the run only (no resume)")
    patience: int = flag(
        100, "--patience", help="epochs without fitness gain before stopping (0: never)", bounds=NON_NEGATIVE
    )
    save_period: int = flag(-1, "--save-period", help="also keep epochN.pt every N epochs (<= 0: never)")
    project: str = flag("runs/train", "--project", help="folder of runs")
    name: str = flag("exp", "--name", help="run name (numbered name2, name3, ... unless --exist-ok)")
    exist_ok: bool = flag(False, "--exist-ok", help="reuse project/name instead of numbering a new one")
    seed: int = flag(0, "--seed", help="random seed", bounds=SEED)
    grad_clip: float = flag(0.0, "--grad-clip", help="max gradient norm (0: off)", bounds=NON_NEGATIVE)
    ignore_mode: str = flag(
        "fill",
        "--ignore-mode",
        choices=IGNORE_MODES,
        help="ignored regions in training images: 'fill' paints them grey, 'keep' leaves them (the original)",
    )
    autoanchor: bool = flag(True, "--noautoanchor", help="keep the model's anchors as they are")
    warmup_min_steps: int = flag(
        100, "--warmup-min-steps", metavar="BATCHES", bounds=NON_NEGATIVE,
        help="the warm-up lasts at least this many batches, at most half the run (YOLOv5's rule; 0: warmup_epochs "
        "alone)",
    )  # fmt: skip
    val_conf: float = checked(VAL_CONF, bounds=FRACTION)
    val_iou: float = checked(NMS_IOU, bounds=FRACTION)
    max_det: int = checked(MAX_DET, bounds=AT_LEAST_ONE)
    plots: bool = flag(True, "--no-plots", help="skip labels.jpg, train_batch*.jpg, results.png")

    def __post_init__(self) -> None:
        """Raises InputError naming the flag (`setting_name`) of the first setting that is out of range.
        A single number for `freeze` (saved by older versions, or given from Python) becomes a 1-tuple."""
        if type(self.freeze) is int:
            object.__setattr__(self, "freeze", (self.freeze,))
        check_field_types(self)  # types, choices and bounds
        if not self.freeze:
            raise InputError(f"{self._flag('freeze')} needs a number of layers or layer indices")
        if self.tile and self.rect:
            raise InputError(f"{self._flag('tile')} draws windows at random: not with {self._flag('rect')}")

    def _flag(self, name: str) -> str:
        return setting_name(self, name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """A config from saved args, ignoring keys this version does not know."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

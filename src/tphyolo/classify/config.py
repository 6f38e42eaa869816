"""Settings of a crop-classifier training run; each field is also its `tphyolo classify` flag."""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.data.files.image_limits import IMGSZ_BOUNDS, MAX_IMGSZ
from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE, SEED, Bounds, check_field_types, flag, imgsz_flag

DEFAULT_ARCH = "crop-cnn"  # the architecture trained unless --arch says otherwise (`small_cnn.py`)
MIN_BOX_SIDE = 4  # pixels: smaller objects carry too little to classify and are skipped
OPTIMIZERS = ("AdamW", "SGD")
DEFAULT_LR = {"AdamW": 1e-3, "SGD": 1e-2}
DEFAULT_WEIGHT_DECAY = {"AdamW": 0.05, "SGD": 5e-4}


@dataclass(frozen=True)
class ClassifierSplit:
    """The split `tphyolo classify val` scores a classifier on; its field is also the flag."""

    task: str = flag("val", "--task", choices=("val", "test"), help="the split to evaluate")

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds


@dataclass(frozen=True)
class ClassifyConfig:
    """A training run: crops of the `classes` of `data` (default: its `confusable:` list, else all classes),
    `context` of the box size added on each side, warped to `img` pixels; `arch` trained from scratch (or from
    local `weights`) for `epochs` with `optimizer` and cosine decay; results in project/name. With a `detector`,
    its default weight is then chosen by a sweep on val (`sweep.py`) with that detector at `detector_img`."""

    data: str = flag("synthetic-fine", "--data", help="dataset yaml, image folder or built-in name")
    classes: tuple[str, ...] | None = flag(
        None, "--classes", help="class names to classify (default: the dataset's 'confusable' list, else all)"
    )
    arch: str = flag(DEFAULT_ARCH, "--arch", help="crop-cnn or a torchvision classification architecture")
    img: int = imgsz_flag(64, help="crop size, pixels", bounds=Bounds(8, MAX_IMGSZ))
    context: float = flag(
        0.1, "--context", help="context added on each side of a box, as a fraction of its size", bounds=NON_NEGATIVE
    )
    min_size: float = flag(
        MIN_BOX_SIDE, "--min-size", help="skip boxes smaller than this on either side, pixels", bounds=Bounds(1)
    )
    epochs: int = flag(6, "--epochs", help="training epochs", bounds=AT_LEAST_ONE)
    batch: int = flag(32, "--batch", "--batch-size", help="crops per batch (BatchNorm needs 2)", bounds=Bounds(2))
    weights: str | None = flag(
        None, "--weights", help="train: local starting weights (torchvision state dict or ours); val: the classifier"
    )
    optimizer: str = flag("AdamW", "--optimizer", choices=OPTIMIZERS, help="optimiser")
    lr: float | None = flag(
        None,
        "--lr",
        help="initial learning rate (default: 0.001 for AdamW, 0.01 for SGD)",
        bounds=Bounds(0, low_open=True),
    )
    weight_decay: float | None = flag(
        None, "--weight-decay", help="weight decay (default: 0.05 AdamW, 5e-4 SGD)", bounds=NON_NEGATIVE
    )
    workers: int = flag(
        0, "--workers", help="data loader processes (0: load in the training process)", bounds=NON_NEGATIVE
    )
    project: str = flag("runs/classify", "--project", help="folder of runs")
    name: str = flag("exp", "--name", help="run name (numbered name2, name3, ... unless --exist-ok)")
    exist_ok: bool = flag(False, "--exist-ok", help="reuse project/name instead of numbering a new one")
    seed: int = flag(0, "--seed", help="random seed", bounds=SEED)
    detector: str | None = flag(
        None, "--detector", help="train: detector to sweep the classifier's weight with on val (saved with it)"
    )
    detector_img: int = flag(
        640, "--detector-img", help="the detector's inference size for the sweep, pixels", bounds=IMGSZ_BOUNDS
    )

    def __post_init__(self) -> None:
        """Raises ValueError naming the flag of the first setting of the wrong type or out of its bounds."""
        check_field_types(self)  # types, choices and bounds

    @property
    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else DEFAULT_LR[self.optimizer]

    @property
    def decay(self) -> float:
        return self.weight_decay if self.weight_decay is not None else DEFAULT_WEIGHT_DECAY[self.optimizer]

"""Settings of a crop-classifier training run; each field is also its `tphyolo classify` flag."""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.flags import flag

DEFAULT_ARCH = "crop-cnn"  # the architecture trained unless --arch says otherwise (`small_cnn.py`)
MIN_BOX_SIDE = 4  # pixels: smaller objects carry too little to classify and are skipped
OPTIMIZERS = ("AdamW", "SGD")
DEFAULT_LR = {"AdamW": 1e-3, "SGD": 1e-2}
DEFAULT_WEIGHT_DECAY = {"AdamW": 0.05, "SGD": 5e-4}


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
    img: int = flag(64, "--img", "--imgsz", "--img-size", help="crop size, pixels")
    context: float = flag(0.1, "--context", help="context added on each side of a box, as a fraction of its size")
    min_size: float = flag(MIN_BOX_SIDE, "--min-size", help="skip boxes smaller than this on either side, pixels")
    epochs: int = flag(6, "--epochs", help="training epochs")
    batch: int = flag(32, "--batch", "--batch-size", help="crops per batch")
    weights: str | None = flag(
        None, "--weights", help="train: local starting weights (torchvision state dict or ours); val: the classifier"
    )
    optimizer: str = flag("AdamW", "--optimizer", choices=OPTIMIZERS, help="optimiser")
    lr: float | None = flag(None, "--lr", help="initial learning rate (default: 0.001 for AdamW, 0.01 for SGD)")
    weight_decay: float | None = flag(None, "--weight-decay", help="weight decay (default: 0.05 AdamW, 5e-4 SGD)")
    workers: int = flag(0, "--workers", help="data loader processes (0: load in the training process)")
    project: str = flag("runs/classify", "--project", help="folder of runs")
    name: str = flag("exp", "--name", help="run name (numbered name2, name3, ... unless --exist-ok)")
    exist_ok: bool = flag(False, "--exist-ok", help="reuse project/name instead of numbering a new one")
    seed: int = flag(0, "--seed", help="random seed")
    detector: str | None = flag(
        None, "--detector", help="train: detector to sweep the classifier's weight with on val (saved with it)"
    )
    detector_img: int = flag(640, "--detector-img", help="the detector's inference size for the sweep, pixels")

    def __post_init__(self) -> None:
        if self.img < 8 or self.epochs < 1 or self.batch < 2 or self.context < 0 or self.min_size < 1:
            raise ValueError(
                f"need img >= 8, epochs >= 1, batch >= 2, context >= 0, min_size >= 1; got img={self.img}, "
                f"epochs={self.epochs}, batch={self.batch}, context={self.context}, min_size={self.min_size}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; known: {list(OPTIMIZERS)}")

    @property
    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else DEFAULT_LR[self.optimizer]

    @property
    def decay(self) -> float:
        return self.weight_decay if self.weight_decay is not None else DEFAULT_WEIGHT_DECAY[self.optimizer]

"""TrainConfig: every setting of a training run, as plain data saved with its checkpoints (args.yaml)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from tphyolo.engine.optim import OPTIMIZERS

CACHE_CHOICES = (None, "ram", "disk")
IGNORE_MODES = ("fill", "keep")


@dataclass(frozen=True)
class TrainConfig:
    """A training run. The defaults are the built-in quick job: a small TPH model on the synthetic set.

    data: dataset yaml, image folder or built-in name; model: model yaml or built-in name; weights: a
    checkpoint (ours, original TPH-YOLOv5 or YOLOv5 .pt) to transfer from; hyp: hyp yaml or built-in name.
    batch: images per process per step; gradients accumulate over batches until an optimiser step has seen
        about `nominal_batch` images (64, as the original; small datasets learn faster with nominal_batch=batch).
    freeze: freeze the first `freeze` layers. patience: epochs without fitness gain before stopping (0 = never).
    save_period: also keep epoch{N}.pt every N epochs (<= 0: never). grad_clip: max gradient norm (0 = off).
    ignore_mode: "fill" paints ignored regions grey in training images, "keep" leaves them (the original).
    warmup_min_steps: minimum warm-up length in optimiser batches (the original used 1000; later YOLOv5 100).
    """

    data: str = "synthetic"
    model: str = "tph-yolov5n"
    weights: str | None = None
    hyp: str = "synthetic"
    imgsz: int = 320
    batch: int = 8
    nominal_batch: int = 8
    epochs: int = 20
    workers: int = 2
    optimizer: str = "AdamW"
    cos_lr: bool = False
    label_smoothing: float = 0.0
    cache: str | None = None
    rect: bool = False
    multi_scale: bool = False
    sync_bn: bool = False
    freeze: int = 0
    patience: int = 100
    save_period: int = -1
    project: str = "runs/train"
    name: str = "exp"
    exist_ok: bool = False
    seed: int = 0
    grad_clip: float = 0.0
    ignore_mode: str = "fill"
    autoanchor: bool = True
    warmup_min_steps: int = 100
    val_conf: float = 0.001
    val_iou: float = 0.6
    max_det: int = 500
    plots: bool = True

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.cache not in CACHE_CHOICES:
            raise ValueError(f"cache must be one of {CACHE_CHOICES}, got {self.cache!r}")
        if self.ignore_mode not in IGNORE_MODES:
            raise ValueError(f"ignore_mode must be one of {IGNORE_MODES}, got {self.ignore_mode!r}")
        for name in ("imgsz", "batch", "epochs", "nominal_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.workers < 0 or self.freeze < 0:
            raise ValueError("workers and freeze must not be negative")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """A config from saved args, ignoring keys this version does not know."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

"""Run under torchrun by test_trainer.py: validation during DDP training on every rank against rank 0 alone.

Each rank builds the trainer (rank 0's EMA weights scaled by 1.01, so that a rank that validated its own copy
would score something else), validates its share of the batches, and rank 0 compares the gathered numbers with
a one-process validation of the same EMA (and of a noisy oracle, whose metrics are far from 0) on the whole
val split. Rank 0 writes OUT/validation.json. Not a test module."""

import json
import sys
from pathlib import Path

import torch
from tests.evaluation.noisy_oracle import NoisyOracle

from tphyolo.data.loader import LoaderSettings, build_dataloader
from tphyolo.evaluation.loop import evaluate
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.distributed import barrier, destroy_process_group
from tphyolo.training.config import TrainConfig
from tphyolo.training.loop import LOSS_NAMES
from tphyolo.training.trainer import Trainer
from tphyolo.training.val_loss import ValLoss


def one_process(trainer: Trainer, model, loader) -> dict[str, float]:
    tracker = ValLoss(model, trainer.loss_fn) if model is trainer.optim.ema.ema else None
    results = evaluate(model, tracker.batches(loader) if tracker else loader, names=trainer.names,
                       config=_config(trainer), runtime=trainer.runtime, device=trainer.device)  # fmt: skip
    losses = tracker.mean().tolist() if tracker else []
    return {**trainer._metrics(results), **{f"val/{n}_loss": v for n, v in zip(LOSS_NAMES, losses, strict=False)}}


def _config(trainer: Trainer):
    from tphyolo.infer.config import InferenceConfig

    cfg = trainer.cfg
    return InferenceConfig(conf=cfg.val_conf, iou=cfg.val_iou, max_det=cfg.max_det)


def main(data: str, out_dir: str) -> None:
    cfg = TrainConfig(data=data, model="tph-yolov5n", imgsz=128, batch=1, epochs=1, workers=0, project=out_dir,
                      name="ddp-val", exist_ok=True, plots=False, autoanchor=False)  # fmt: skip
    trainer = Trainer(cfg, RuntimeConfig(device="cpu"), verbose=False)
    val_set = trainer.data.val_loader.dataset
    whole = build_dataloader(val_set, LoaderSettings(batch_size=2 * cfg.batch))  # the one-process loader
    if trainer.dist.is_main:
        with torch.no_grad():
            for p in trainer.optim.ema.ema.parameters():
                p.mul_(1.01)
    shared = trainer.validate()
    oracle = NoisyOracle(whole, trainer.names)
    shared_oracle = trainer._metrics(trainer._evaluate(oracle))
    if trainer.dist.is_main:
        alone = one_process(trainer, trainer.optim.ema.ema, whole)
        alone_oracle = one_process(trainer, oracle, whole)
        info = {"world_size": trainer.dist.world_size, "val_images": len(val_set), "shared": shared, "alone": alone,
                "shard": len(trainer.data.val_shard.indices), "shared_oracle": shared_oracle,
                "alone_oracle": alone_oracle}  # fmt: skip
        (Path(out_dir) / "validation.json").write_text(json.dumps(info))
    barrier(trainer.dist)
    destroy_process_group(trainer.dist)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

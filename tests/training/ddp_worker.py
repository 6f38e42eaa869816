"""Run under torchrun by test_trainer.py: a few DDP training steps on CPU (gloo), then each rank saves its
weights and whether its model was wrapped as expected. Not a test module itself."""

import json
import sys
from pathlib import Path

import torch

from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.trainer import Trainer


def main(data: str, out_dir: str) -> None:
    cfg = TrainConfig(
        data=data, model="tph-yolov5n", imgsz=128, batch=2, epochs=1, workers=0, project=out_dir, name="ddp",
        exist_ok=True, sync_bn=True, plots=False, autoanchor=False, warmup_min_steps=1,
    )  # fmt: skip
    trainer = Trainer(cfg, RuntimeConfig(device="cpu"))
    rank = trainer.dist.rank
    out = Path(out_dir)
    if rank == 0:
        torch.save({k: v.detach().clone() for k, v in trainer.model.state_dict().items()}, out / "initial.pt")
    trainer.fit()
    torch.save({k: v.detach().clone() for k, v in trainer.model.state_dict().items()}, out / f"rank{rank}.pt")
    info = {
        "world_size": trainer.dist.world_size,
        "ddp": type(trainer.train_model).__name__,
        "steps": trainer.progress.steps.step,
        "samples": len(trainer.data.train_loader.sampler),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(info))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

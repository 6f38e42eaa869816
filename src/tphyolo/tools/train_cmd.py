"""`tphyolo train`: train a model; with no arguments, a small TPH model on the built-in synthetic set."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import fields
from pathlib import Path

from tphyolo.engine.train_config import CACHE_CHOICES, TrainConfig
from tphyolo.runtime import parse_device

USES_RUNTIME = True

_DEFAULTS = {f.name: f.default for f in fields(TrainConfig)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = _DEFAULTS
    parser.add_argument("--data", default=d["data"], help="dataset yaml, image folder, or 'synthetic' / 'visdrone'")
    parser.add_argument("--model", "--cfg", dest="model", default=d["model"], help="model yaml or built-in name")
    parser.add_argument("--weights", default=None, help="checkpoint to start from (ours, TPH-YOLOv5 or YOLOv5 .pt)")
    parser.add_argument("--hyp", default=d["hyp"], help="hyp yaml or built-in name (visdrone, scratch-low, ...)")
    parser.add_argument("--img", "--imgsz", dest="imgsz", type=int, default=d["imgsz"], help="train size (pixels)")
    parser.add_argument("--batch", "--batch-size", dest="batch", type=int, default=d["batch"], help="per process")
    parser.add_argument(
        "--nbs",
        "--nominal-batch",
        dest="nominal_batch",
        type=int,
        default=d["nominal_batch"],
        help="accumulate gradients until a step has seen this many images (the original: 64)",
    )
    parser.add_argument("--epochs", type=int, default=d["epochs"])
    parser.add_argument("--workers", type=int, default=d["workers"], help="data loader processes per training process")
    parser.add_argument("--optimizer", default=d["optimizer"], choices=("SGD", "Adam", "AdamW"))
    parser.add_argument("--cos-lr", action="store_true", help="cosine learning-rate decay (default: linear)")
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--cache", choices=[c for c in CACHE_CHOICES if c], default=None, help="cache images")
    parser.add_argument("--rect", action="store_true", help="rectangular training batches (no mosaic shuffle)")
    parser.add_argument("--multi-scale", action="store_true", help="vary the image size +/- 50%% per batch")
    parser.add_argument("--sync-bn", action="store_true", help="SyncBatchNorm across processes (DDP only)")
    parser.add_argument("--freeze", type=int, default=0, help="freeze the first N layers")
    parser.add_argument("--patience", type=int, default=d["patience"], help="epochs without improvement to stop")
    parser.add_argument("--save-period", type=int, default=-1, help="also save epochN.pt every N epochs")
    parser.add_argument("--grad-clip", type=float, default=0.0, help="max gradient norm (0: off)")
    parser.add_argument("--ignore-mode", choices=("fill", "keep"), default="fill", help="ignored regions in images")
    parser.add_argument("--noautoanchor", action="store_true", help="keep the model's anchors as they are")
    parser.add_argument("--project", default=d["project"])
    parser.add_argument("--name", default=d["name"])
    parser.add_argument("--exist-ok", action="store_true", help="reuse project/name instead of numbering a new one")
    parser.add_argument("--resume", nargs="?", const="", default=None, metavar="PATH", help="continue a run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plots", action="store_true", help="skip labels.jpg, train_batch*.jpg, results.png")


def _config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        data=args.data,
        model=args.model,
        weights=args.weights,
        hyp=args.hyp,
        imgsz=args.imgsz,
        batch=args.batch,
        nominal_batch=args.nominal_batch,
        epochs=args.epochs,
        workers=args.workers,
        optimizer=args.optimizer,
        cos_lr=args.cos_lr,
        label_smoothing=args.label_smoothing,
        cache=args.cache,
        rect=args.rect,
        multi_scale=args.multi_scale,
        sync_bn=args.sync_bn,
        freeze=args.freeze,
        patience=args.patience,
        save_period=args.save_period,
        project=args.project,
        name=args.name,
        exist_ok=args.exist_ok,
        seed=args.seed,
        grad_clip=args.grad_clip,
        ignore_mode=args.ignore_mode,
        autoanchor=not args.noautoanchor,
        plots=not args.no_plots,
    )


def latest_last_checkpoint(project: str | Path) -> Path:
    """The most recently written weights/last.pt under `project`."""
    candidates = sorted(Path(project).glob("*/weights/last.pt"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise FileNotFoundError(f"--resume: no */weights/last.pt under {project}")
    return candidates[-1]


def run(args: argparse.Namespace) -> int:
    import os

    from tphyolo.engine.trainer import Trainer

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    devices = parse_device(args.device)
    if len(devices) > 1 and "LOCAL_RANK" not in os.environ:
        from tphyolo.engine.distributed import launch_torchrun

        return launch_torchrun(sys.argv[1:], nproc=len(devices))
    if args.resume is not None:
        path = Path(args.resume) if args.resume else latest_last_checkpoint(args.project)
        trainer = Trainer.resume(path, args.runtime)
    else:
        trainer = Trainer(_config(args), args.runtime)
    result = trainer.fit()
    if trainer.dist.is_main:
        print(f"results in {result.run_dir}; weights: {result.last}" + (f", {result.best}" if result.best else ""))
    return 0

"""The end of a training run, and its start's label figure: best.pt validated as `tphyolo val` validates it, the
weights stripped for release, the curves and label statistics drawn."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tphyolo.evaluation.results import EvalResults
from tphyolo.evaluation.settings import ValConfig
from tphyolo.evaluation.val import val_spec
from tphyolo.infer.config import MODEL_CHOSEN, VALIDATION
from tphyolo.infer.slicing import MODEL, SliceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.ops.boxes import xyxy_to_cxcywh
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.log import plot_results
from tphyolo.training.plots import plot_labels
from tphyolo.training.state import strip_for_release

LOGGER = logging.getLogger("tphyolo.train")


def validate_as_val(
    best: Path, cfg: TrainConfig, *, runtime: RuntimeConfig, device: torch.device, run_dir: Path | None,
    plots: bool, verbose: bool,
) -> EvalResults:  # fmt: skip
    """`best` scored on `cfg`'s val split as `tphyolo val --weights best --data DATA` scores it with no other flags
    (`tphyolo.evaluation.val.val_spec`: the same runtime, precision, image size and batches; under --deterministic, as
    with `--deterministic`), so that command reproduces the table; `run_dir` (rank 0's; None on other ranks) gets
    val's decisions.yaml entry and, with `plots`, YOLOv5's validation figures, as `tphyolo val --plots` writes
    them; a run on tiles (--tile) is scored sliced, as `tphyolo val` slices its checkpoint by default. Every rank
    of a distributed run scores its share."""
    if run_dir is not None:
        LOGGER.info("validating %s as `tphyolo val --weights %s --data %s%s` does", best, best, cfg.data,
                    " --deterministic" if runtime.deterministic else "")  # fmt: skip
    # no loader workers: beside the compiled runtime they would start from a fork server, which re-imports a
    # script's main module (`tphyolo.data.loader`); the numbers do not depend on them
    config = ValConfig(datasets_dir=cfg.datasets_dir, workers=0, plots=plots, save_dir=run_dir, progress=verbose)
    inference = replace(VALIDATION, conf=cfg.val_conf, iou=cfg.val_iou, max_det=cfg.max_det, from_model=MODEL_CHOSEN)
    as_val = RuntimeConfig(device=runtime.device, deterministic=runtime.deterministic)
    spec = DetectorSpec(best, inference=inference, runtime=as_val, device=str(device), slicing=SliceConfig(MODEL))
    return val_spec(spec, cfg.data, config)


def strip(path: Path) -> None:
    """`strip_for_release(path)`, logged."""
    before, after = strip_for_release(path)
    LOGGER.info("%s: optimiser state stripped, %.1f MB -> %.1f MB", path, before / 1e6, after / 1e6)


def plot_run(cfg: TrainConfig, run_dir: Path) -> None:
    """results.png from the run's results.csv, with `plots` and once there is one (an interrupted run's too)."""
    if cfg.plots and (run_dir / "results.csv").exists():
        plot_results(run_dir / "results.csv")


def plot_train_labels(records: Sequence[Any], names: Sequence[str], path: Path) -> None:
    """labels.jpg: the classes and normalised boxes of the training records."""
    classes = np.concatenate([r.labels.classes for r in records] + [np.zeros(0, np.int64)])
    boxes = [r.labels.boxes / np.array([r.width, r.height] * 2, dtype=np.float32) for r in records]
    cxcywh = xyxy_to_cxcywh(np.concatenate([*boxes, np.zeros((0, 4), np.float32)]))
    plot_labels(classes, cxcywh, list(names), path)

"""Score a checkpoint on a dataset split in one call, as `tphyolo val` does (`val_spec` scores a `DetectorSpec`):

metrics = tphyolo.val("best.pt", data="visdrone", imgsz=1536, protocol="visdrone")
metrics.map50, metrics.map, metrics.per_class

or with the settings as objects: `tphyolo.val("best.pt", "visdrone", ValConfig(protocol="visdrone"),
inference=InferenceConfig(imgsz=1536, conf=0.001, iou=0.45, batch=32))`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.loader import DatasetSettings, LoaderSettings, build_dataloader, build_dataset
from tphyolo.data.report import format_problems
from tphyolo.errors import InputError
from tphyolo.evaluation.class_match import check_data_classes, check_label_ids
from tphyolo.evaluation.evaluator import Evaluator
from tphyolo.evaluation.loop import evaluate
from tphyolo.evaluation.results import EvalResults
from tphyolo.evaluation.settings import VAL_CONFIG_FIELDS, EvalSettings, ValConfig
from tphyolo.evaluation.writers import Writer, writers_for
from tphyolo.infer.backends.pytorch import Weights
from tphyolo.infer.build import build_detector, spec_device
from tphyolo.infer.config import VALIDATION, InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.decisions import write_decisions
from tphyolo.runtime.distributed import DistContext, barrier, init_process_group
from tphyolo.runtime.run_dir import removed_if_left_empty
from tphyolo.runtime.sharding import Shard

_log = logging.getLogger(__name__)


def val(
    weights: Weights,
    data: str | Path,
    config: ValConfig | None = None,
    *,
    inference: InferenceConfig = VALIDATION,
    runtime: RuntimeConfig | None = None,
    device: str | None = None,
    evaluators: Sequence[Evaluator] = (),
    writers: Sequence[Writer] = (),
    **settings: Any,
) -> EvalResults:
    """The metrics of `weights` (a checkpoint, an exported model or a model) on split `config.task` of `data` (a
    built-in name, a dataset yaml or an image folder), scored by `config.protocol` (yolo, coco, visdrone).

    config: what the run scores and writes (`ValConfig`: task, protocol, workers, save_dir with save_json, save_txt
    and plots, ...); inference: the inference settings (default: validation's conf 0.001 and batch 32, and
    predict's NMS iou 0.45). `settings` are fields of either, by name (`imgsz=1536`, `protocol="visdrone"`,
    `tta=True`), replacing those of `config` and `inference`, or the detector's (`slicing`: a SliceConfig, a window
    size or "auto"; `classifier`, a crop-classifier checkpoint, with `classifier_weight`; `fuse`).
    runtime/device: how and where to run. evaluators, writers: as `val_spec`, which runs the detector these
    make (`DetectorSpec.from_keywords`)."""
    if isinstance(config, InferenceConfig):  # val's `config` was the InferenceConfig before ValConfig
        raise TypeError("val(config=...) takes a ValConfig; pass the InferenceConfig as inference=...")
    config = replace(config or ValConfig(), **{k: v for k, v in settings.items() if k in VAL_CONFIG_FIELDS})
    detector = {k: v for k, v in settings.items() if k not in VAL_CONFIG_FIELDS and k != "slicing"}
    spec = DetectorSpec.from_keywords(weights, inference, runtime=runtime, device=device,
                                      slice=settings.get("slicing"), **detector)  # fmt: skip
    return val_spec(spec, data, config, evaluators=evaluators, writers=writers)


def val_spec(
    spec: DetectorSpec,
    data: str | Path,
    config: ValConfig | None = None,
    *,
    evaluators: Sequence[Evaluator] = (),
    writers: Sequence[Writer] = (),
) -> EvalResults:
    """The metrics of the detector `spec` (one model) on split `config.task` of `data` (as `val`), built by
    `build_detector` as `Predictor.from_spec(spec)` builds it, so both give the same detections.

    evaluators: results of one's own (`tphyolo.evaluation.evaluator.Evaluator`), in `outputs` by name; writers:
    files of one's own (`tphyolo.evaluation.writers.Writer`), written after those the config asks for, what they
    return in `outputs` under their names (those of the config's writers are left out). With `spec.slicing`,
    each image is cut into windows run at `imgsz`, merged by `inference.merge`, and scored against its full
    ground truth. A fixed-size export gets every image letterboxed to its size (no rect batches). Raises
    ValueError, before any image is read, when the model's and the dataset's classes differ
    (`check_data_classes`), and after the label scan, before inference, when the labels use a class id the model
    does not have.

    Under torchrun every process runs this call: each runs its share of the batches on its device (the
    `local_rank`-th GPU of the spec's device's), rank 0 scores them all, saves, and shows the progress bar; every
    rank returns the scores (`EvalSettings.shard`). The call joins torchrun's process group unless the caller
    has, and leaves it joined for the next call (`tphyolo.runtime.distributed.process_group` joins and leaves)."""
    config = config or ValConfig()
    if config.writes and config.save_dir is None:
        raise InputError("save_json, save_txt and plots need a save_dir")
    if len(spec.models) != 1:
        raise InputError(f"val scores one model; got an ensemble of {len(spec.models)}")
    (weights,) = spec.models
    dist = DistContext.from_env()
    init_process_group(dist, spec_device(spec, dist.local_rank))  # under torchrun; left joined for the next call
    built = build_detector(spec, local_rank=dist.local_rank)  # the crop classifier checked before data are read
    (backend,), inference = built.detector.backends, built.config
    datasets_dir = None if config.datasets_dir is None else Path(config.datasets_dir)

    def load() -> tuple:
        data_config = load_data_config(data, datasets_dir=datasets_dir)
        return data_config, check_data_classes(backend.names, data_config, config.task, model=weights, data_name=data)

    loaded = load() if dist.is_main else None  # rank 0 first: it may generate a built-in set
    barrier(dist)
    data_config, data_names = loaded or load()
    reading = DatasetSettings(imgsz=inference.imgsz, rect=built.detector.fixed_shape is None, stride=backend.stride,
                              batch_size=inference.batch, scan_cache=config.scan_cache)  # fmt: skip
    scanned = build_dataset(data_config, config.task, reading) if dist.is_main else None  # rank 0 writes the cache
    barrier(dist)  # that the others then read
    dataset, split_scan = scanned or build_dataset(data_config, config.task, reading)
    if dist.is_main and (problems := format_problems(config.task, split_scan)):  # files skipped, scored in part
        (config.on_problems or _log.warning)(problems)
    check_label_ids(split_scan, len(backend.names), model=weights, data_name=data)
    shard = Shard.of(len(dataset), unit=inference.batch, ctx=dist)  # whole one-process batches per rank
    loader = build_dataloader(dataset, LoaderSettings(
        batch_size=inference.batch, workers=config.workers, pin_memory=backend.device.type == "cuda",
        indices=shard.indices if dist.distributed else None,
    ))  # fmt: skip
    save_dir = config.save_dir
    if callable(save_dir):
        save_dir = save_dir() if dist.is_main else None
    save_dir = None if save_dir is None else Path(save_dir)
    run = EvalSettings(protocol=config.protocol, progress=config.progress, slicing=built.slicing,
                       keep_images=config.keep_images, shard=shard)  # fmt: skip
    own = writers_for(config, save_dir, conf=inference.conf) if save_dir is not None else []
    with removed_if_left_empty(save_dir):
        if save_dir is not None:
            save_dir.mkdir(parents=True, exist_ok=True)
        results = evaluate(built.detector, loader, names=list(data_names or backend.names), settings=run,
                           evaluators=evaluators, writers=[*own, *writers])  # fmt: skip
        if save_dir is not None and dist.is_main:
            write_decisions(save_dir, {"val": built.decisions})
    left_out = {writer.name for writer in own}
    outputs = {name: value for name, value in results.outputs.items() if name not in left_out}
    return replace(results, save_dir=save_dir, outputs=outputs)

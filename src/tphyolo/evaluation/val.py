"""Score a checkpoint on a dataset split in one call, as `tphyolo val` does:

metrics = tphyolo.val("best.pt", data="visdrone", imgsz=1536, protocol="visdrone")
metrics.map50, metrics.map, metrics.per_class
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from tphyolo.classify.classifier import CropClassifier, as_classifier
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.letterbox import check_imgsz
from tphyolo.data.loader import build_dataloader, build_dataset
from tphyolo.data.report import format_problems
from tphyolo.evaluation.loop import EvalResults, evaluate
from tphyolo.evaluation.sharded import Shard
from tphyolo.infer.backends.pytorch import Weights, load_backends
from tphyolo.infer.config import VALIDATION, InferenceConfig, inference_config
from tphyolo.runtime.config import RuntimeConfig, resolve_device
from tphyolo.runtime.distributed import DistContext, barrier, init_process_group

_log = logging.getLogger(__name__)


def val(
    weights: Weights,
    data: str | Path,
    *,
    config: InferenceConfig = VALIDATION,
    task: str = "val",
    protocol: str = "yolo",
    runtime: RuntimeConfig | None = None,
    device: str | None = None,
    datasets_dir: str | Path | None = None,
    workers: int = 2,
    scan_cache: bool = True,
    progress: bool = False,
    on_problems: Callable[[str], None] | None = None,
    classifier: str | Path | CropClassifier | None = None,
    classifier_weight: float | None = None,
    save_dir: str | Path | Callable[[], Path] | None = None,
    save_json: bool = False,
    save_txt: bool = False,
    plots: bool = False,
    keep_images: bool = False,
    **settings,
) -> EvalResults:
    """The metrics of `weights` (a checkpoint, an exported model or a model) on split `task` of `data` (a
    built-in name, a dataset yaml or an image folder), scored by `protocol` (yolo, coco, visdrone).

    config: the inference settings (default: validation's conf 0.001, iou 0.6, batch 32); its fields may also be
    given as keywords (`imgsz=1536`, `tta=True`). runtime/device: how and where to run. datasets_dir: where
    built-in configs' relative paths start. progress: a progress bar. on_problems: called with the report of
    unusable files in the split (default: a logged warning). classifier: a crop classifier that re-labels the
    detections of its classes. With `save_dir` (a folder, or a function that creates one, called once the data
    are loaded so that a run failing before leaves no folder): `save_json`, `save_txt`, `plots` as `evaluate`
    writes them. keep_images: keep each image's detections and ground truth in `image_results` (for the report).
    Raises ValueError when the model's and the dataset's class counts differ.

    Under torchrun every process runs this call: each runs its share of the batches on its device (the
    `local_rank`-th GPU of `device`'s), rank 0 scores them all, saves, and shows the progress bar; every rank
    returns the scores (`evaluate`'s `shard`). The call joins torchrun's process group unless the caller has,
    and leaves it joined for the next call (`tphyolo.runtime.distributed.process_group` joins and leaves)."""
    runtime = runtime or RuntimeConfig()
    dist = DistContext.from_env()
    torch_device = resolve_device(str(device)) if device is not None else runtime.torch_device(dist.local_rank)
    config = inference_config(config, **settings)
    init_process_group(dist, torch_device)  # under torchrun; left joined for the caller's next call
    (backend,) = load_backends(weights, runtime=runtime, device=torch_device)
    if classifier is not None:  # checked against the detector before any data is read
        classifier = as_classifier(classifier, detector_names=backend.names, device=torch_device,
                                   runtime=runtime, weight=classifier_weight)  # fmt: skip
    imgsz = check_imgsz(config.imgsz, backend.stride)

    def load() -> tuple:
        data_config = load_data_config(data, datasets_dir=None if datasets_dir is None else Path(datasets_dir))
        if data_config.names and len(data_config.names) != len(backend.names):
            raise ValueError(f"{weights}: {len(backend.names)} classes, but {data} has {len(data_config.names)}")
        dataset, scan = build_dataset(
            data_config, task, imgsz=imgsz, rect=True, batch_size=config.batch, stride=backend.stride,
            scan_cache=scan_cache,
        )  # fmt: skip
        return list(data_config.names) or backend.names, dataset, scan

    loaded = load() if dist.is_main else None  # rank 0 scans first and writes the caches the others read
    barrier(dist)
    names, dataset, scan = loaded or load()
    if scan.report.problems and dist.is_main:
        (on_problems or _log.warning)(format_problems(task, scan))
    shard = Shard.of(len(dataset), unit=config.batch, ctx=dist)
    loader = build_dataloader(dataset, batch_size=config.batch, workers=workers,
                              pin_memory=torch_device.type == "cuda",
                              indices=shard.indices if dist.distributed else None)  # fmt: skip
    if callable(save_dir):
        save_dir = save_dir() if dist.is_main else None
    return evaluate(
        backend,
        loader,
        names=names,
        config=config,
        protocol=protocol,
        save_dir=None if save_dir is None else Path(save_dir),
        save_json=save_json,
        save_txt=save_txt,
        plots=plots,
        progress=progress,
        classifier=classifier,
        keep_images=keep_images,
        shard=shard,
    )

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
from tphyolo.evaluation.class_match import check_data_classes, check_label_ids
from tphyolo.evaluation.loop import EvalResults, evaluate
from tphyolo.evaluation.sharded import Shard
from tphyolo.infer.backends.pytorch import Weights, load_backends
from tphyolo.infer.config import VALIDATION, InferenceConfig, inference_config
from tphyolo.infer.input_shape import fixed_input_shape
from tphyolo.infer.slicing import SliceConfig
from tphyolo.runtime.config import RuntimeConfig, resolve_device
from tphyolo.runtime.distributed import DistContext, barrier, init_process_group
from tphyolo.runtime.run_dir import removed_if_left_empty

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
    slicing: int | str | SliceConfig | None = None,
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
    slicing: score sliced predictions on the full images -- a window size, "auto" or a SliceConfig: each image is
    cut into windows run at `imgsz`, merged by `config.merge`, and scored against its full ground truth.
    A fixed-size export gets every image letterboxed to its size (no rect batches). Raises ValueError, before
    any image is read, when the model's and the dataset's classes differ (`check_data_classes`), and after the
    label scan, before inference, when the labels use a class id the model does not have.

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
    fixed = fixed_input_shape([backend], config)

    def load() -> tuple:
        data_config = load_data_config(data, datasets_dir=None if datasets_dir is None else Path(datasets_dir))
        return data_config, check_data_classes(backend.names, data_config, task, model=weights, data_name=data)

    loaded = load() if dist.is_main else None  # rank 0 first: it may generate a built-in set
    barrier(dist)
    data_config, data_names = loaded or load()
    if classifier is not None:  # checked against the detector before any data is read
        classifier = as_classifier(classifier, detector_names=backend.names, device=torch_device,
                                   runtime=runtime, weight=classifier_weight)  # fmt: skip
    imgsz = max(fixed) if fixed is not None else check_imgsz(config.imgsz, backend.stride)

    def scan() -> tuple:
        return build_dataset(
            data_config, task, imgsz=imgsz, rect=fixed is None, batch_size=config.batch, stride=backend.stride,
            scan_cache=scan_cache,
        )  # fmt: skip

    scanned = scan() if dist.is_main else None  # rank 0 scans first and writes the cache the others read
    barrier(dist)
    dataset, split_scan = scanned or scan()
    if dist.is_main and (problems := format_problems(task, split_scan)):  # files skipped, and scored in part
        (on_problems or _log.warning)(problems)
    check_label_ids(split_scan, len(backend.names), model=weights, data_name=data)
    shard = Shard.of(len(dataset), unit=config.batch, ctx=dist)  # whole one-process batches per rank
    loader = build_dataloader(dataset, batch_size=config.batch, workers=workers,
                              pin_memory=torch_device.type == "cuda",
                              indices=shard.indices if dist.distributed else None)  # fmt: skip
    if callable(save_dir):
        save_dir = save_dir() if dist.is_main else None
    with removed_if_left_empty(save_dir):
        return evaluate(
            backend,
            loader,
            names=list(data_names or backend.names),
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
            slicing=SliceConfig(slicing) if isinstance(slicing, int | str) else slicing,
            imgsz=imgsz,
        )

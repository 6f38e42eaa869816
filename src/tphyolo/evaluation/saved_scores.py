"""Saved detections scored against ground truth, whichever files hold them: a VisDrone annotation folder
(scored by any protocol of the registry), a COCO dataset json (the COCO protocol) or GeoJSON in map units (box
IoU); and saved tracks, against track files or a video data set's split. The categories of VisDrone files are
read through a category table (`tphyolo.data.categories`): the one given, else that of the data yaml that
declares the annotation folder (`declared_table`), else VisDrone-DET's. What `tphyolo eval` prints; under
torchrun the VisDrone files are read by every rank, scored by rank 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tphyolo.data.categories import VISDRONE, CategoryTable
from tphyolo.data.dataset_config import declared_table, load_data_config
from tphyolo.data.mot.sequences import tracking_split
from tphyolo.errors import InputError
from tphyolo.evaluation.detection_files import annotation_files, score_coco_files, visdrone_image_results
from tphyolo.evaluation.geojson_files import score_geojson_files
from tphyolo.evaluation.results import yolo_table
from tphyolo.infer.config import MAX_DET
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.registry import COCO_JSON, GEOJSON, get_protocol, saved_format
from tphyolo.metrics.tracking import TrackingResult, evaluate_tracking
from tphyolo.runtime.distributed import DistContext
from tphyolo.runtime.sharding import Shard

SINGLE = DistContext()  # one process


@dataclass(frozen=True)
class SavedScores:
    """A protocol's overall numbers (percent), its per-class numbers and its printed table."""

    overall: Mapping[str, Any]
    per_class: Mapping[str, Any]
    table: str


def folder_table(gt: Path, table: CategoryTable | None = None) -> CategoryTable:
    """The category table the VisDrone annotation folder `gt` is read with: `table` when given, else that of
    the data yaml that declares it (`declared_table`), else VisDrone-DET's."""
    if table is not None:
        return table
    declared = declared_table(gt)
    return VISDRONE if declared is None else declared[0]


def visdrone_folder_results(
    gt: Path, pred: Path, *, protocol: str, images_dir: Path, with_images: bool = False, dist: DistContext = SINGLE,
    table: CategoryTable = VISDRONE,
) -> list[ImageResult] | None:
    """Each image's results of the VisDrone annotation folder `gt` and result folder `pred`, in file order
    (image sizes from `images_dir` where `protocol` needs them; the images themselves with `with_images`),
    categories read through `table`.
    Under torchrun each rank reads its share of the files and rank 0 gets them all; the other ranks get None."""
    shard = Shard.of(len(annotation_files(gt)), unit=1, ctx=dist)
    images = visdrone_image_results(gt, pred, images_dir=images_dir,
                                    needs_image_size=get_protocol(protocol).needs_image_size,
                                    with_images=with_images, indices=shard.indices, table=table)  # fmt: skip
    return shard.gather(images)


def score_saved_detections(
    gt: Path, pred: Path, *, protocol: str = "visdrone", images_dir: Path | None = None, dist: DistContext = SINGLE,
    table: CategoryTable | None = None,
) -> SavedScores | None:
    """`pred` scored against `gt` by `protocol`, read by `gt`'s suffix: `.geojson` (box IoU in map units: the
    yolo and visdrone protocols' AP50 and AP50-95), `.json` (COCO, the coco protocol only), or a folder of
    VisDrone txt (any protocol; images from `images_dir`, default images/ beside `gt`; class names and categories
    from `table`, default `folder_table`). Rank 0 gets the scores;
    the other ranks of a torchrun run None. Raises ValueError for a protocol the files cannot be scored by."""
    fmt = saved_format(gt)
    if fmt == GEOJSON:
        if fmt not in get_protocol(protocol).saved_formats:
            raise InputError(f"--gt {gt}: GeoJSON is scored by box IoU in map units (AP50, AP50-95) only")
        if not dist.is_main:
            return None
        result = score_geojson_files(gt, pred)
        overall = {"AP50": 100 * result.map50, "AP": 100 * result.map, "P": 100 * result.mp, "R": 100 * result.mr}
        return SavedScores(overall, {}, yolo_table(result))
    if fmt == COCO_JSON:
        if fmt not in get_protocol(protocol).saved_formats:
            raise InputError(f"--protocol {protocol} needs a folder of VisDrone annotation txt files, got {gt}")
        if not dist.is_main:  # one COCO evaluation, on rank 0
            return None
        coco = score_coco_files(gt, pred)
        return SavedScores(coco.overall, coco.per_class, coco.table())
    images_dir = images_dir or gt.parent / "images"
    table = folder_table(gt, table)
    images = visdrone_folder_results(gt, pred, protocol=protocol, images_dir=images_dir, dist=dist, table=table)
    if images is None:
        return None
    scored = get_protocol(protocol).score(images, names=table.names, max_det=MAX_DET)
    return SavedScores(scored.overall, scored.per_class, scored.table)


def score_saved_tracks(
    pred: Path, *, gt: Path | None = None, fmt: str = "visdrone-mot", data: str | None = None, split: str = "val"
) -> TrackingResult:
    """HOTA, CLEAR and Identity of the track files in `pred` against those in `gt` (layout and rules `fmt`), or,
    with `data` (a video data set yaml or built-in name), against its `split`'s ground truth in its layout."""
    if data is not None:
        tracks = tracking_split(load_data_config(data), split)
        gt, fmt = tracks.annotations, tracks.fmt
    if gt is None:
        raise InputError("saved tracks are scored against gt or a data set's split; neither was given")
    return evaluate_tracking(gt, pred, fmt=fmt)

"""Scoring GeoJSON detections against GeoJSON ground truth in map units, as mapping teams hold both.

    results = score_geojson_files("truth.geojson", "ortho.geojson")
    results.map50, results.map

Each feature is one object: its geometry's bounding box (over every coordinate of a Polygon or MultiPolygon; a
Point or line has no area and is refused) in the file's coordinates, its class the `class` property (a name;
else `class_id`), its score the `score` property (predictions; 1 when absent). Both files are one "image" scored
by the YOLO protocol (AP over IoU 0.50:0.95 of the boxes), which does not depend on the units; protocols with
pixel size ranges (COCO, VisDrone) would, and are not offered. Two files naming different CRSs are refused:
reproject one first (`tphyolo predict --to-crs`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tphyolo.data.files.json_files import load_json_file
from tphyolo.errors import InputError
from tphyolo.evaluation.results import EvalResults
from tphyolo.evaluation.scoring import score_images
from tphyolo.metrics.protocol import ImageResult


def _crs(collection: dict) -> str | None:
    crs = collection.get("crs")
    return crs.get("properties", {}).get("name") if isinstance(crs, dict) else None


def read_geojson_objects(path: Path) -> tuple[list[str], np.ndarray, np.ndarray, str | None]:
    """The features of the GeoJSON FeatureCollection `path`: class names (n,), boxes (n, 4) x1, y1, x2, y2 in its
    coordinates, scores (n,), and its CRS name (None without a `crs` member). Raises ValueError naming the
    file and the feature for anything else."""
    collection = load_json_file(path, what="GeoJSON")
    if not isinstance(collection, dict) or collection.get("type") != "FeatureCollection":
        raise InputError(f"{path}: not a GeoJSON FeatureCollection")
    features = collection.get("features")
    if not isinstance(features, list):
        raise InputError(f"{path}: 'features' is not a list")
    names, boxes, scores = [], [], []
    for i, feature in enumerate(features):
        where = f"{path}: feature {i}"
        geometry = feature.get("geometry") if isinstance(feature, dict) else None
        if not isinstance(geometry, dict) or geometry.get("type") not in ("Polygon", "MultiPolygon"):
            raise InputError(f"{where}: needs a Polygon or MultiPolygon geometry")
        try:
            points = np.asarray([p for ring in _rings(geometry) for p in ring], dtype=np.float64).reshape(-1, 2)
        except (TypeError, ValueError) as error:
            raise InputError(f"{where}: coordinates are not [x, y] numbers") from error
        if len(points) == 0 or not np.isfinite(points).all():
            raise InputError(f"{where}: no finite coordinates")
        properties = feature.get("properties") or {}
        name = properties.get("class", properties.get("class_id"))
        if name is None:
            raise InputError(f"{where}: no 'class' (or 'class_id') property")
        score = properties.get("score", 1.0)
        if not isinstance(score, int | float) or not 0 <= score <= 1:
            raise InputError(f"{where}: score {score!r} is not a number in [0, 1]")
        names.append(str(name))
        boxes.append([*points.min(0), *points.max(0)])
        scores.append(float(score))
    return names, np.asarray(boxes, dtype=np.float64).reshape(-1, 4), np.asarray(scores), _crs(collection)


def _rings(geometry: dict) -> list:
    coordinates = geometry.get("coordinates") or []
    return [ring for polygon in coordinates for ring in polygon] if geometry["type"] == "MultiPolygon" else coordinates


def score_geojson_files(gt_path: str | Path, pred_path: str | Path) -> EvalResults:
    """The YOLO-protocol scores of the predictions in `pred_path` against the objects in `gt_path` (module
    docstring); classes are the ground truth's names (sorted), then any only the predictions name."""
    gt_names, gt_boxes, _, gt_crs = read_geojson_objects(Path(gt_path))
    pred_names, pred_boxes, scores, pred_crs = read_geojson_objects(Path(pred_path))
    if gt_crs is not None and pred_crs is not None and gt_crs != pred_crs:
        raise InputError(f"{pred_path} is in {pred_crs}, {gt_path} in {gt_crs}: reproject one to the other's CRS")
    names = sorted(set(gt_names)) + sorted(set(pred_names) - set(gt_names))
    index = {name: i for i, name in enumerate(names)}
    detections = torch.from_numpy(np.concatenate([pred_boxes, scores[:, None],
                                                  np.asarray([index[n] for n in pred_names])[:, None]], 1))  # fmt: skip
    order = torch.argsort(detections[:, 4], descending=True, stable=True)
    result = ImageResult(str(gt_path), None, detections[order].float().reshape(-1, 6),
                         torch.tensor([index[n] for n in gt_names], dtype=torch.int64),
                         torch.from_numpy(gt_boxes).float(), torch.zeros((0, 4)))  # fmt: skip
    scored, _ = score_images([result], names=names, protocol="yolo", max_det=max(len(pred_names), 1))
    return scored

"""Sliced inference against SAHI: same model, same per-slice network, same slices, same merge.

    PYTHONPATH=/work/peers/sahi:src python benchmarks/sahi_slicing.py --scenes 2 --visdrone 2

SAHI (a peer, installed outside the package: `pip install --no-deps --target DIR sahi pybboxes shapely fire
terminaltables`) gets tphyolo's model through its custom-model class: each slice it cuts is run by a tphyolo
`Predictor` without slicing (letterbox, network, NMS), so both sides run the same network on the same pixels
and differ only in how slicing, batching and merging are done. Slices are 640 px with overlap 0.2, no full-image
pass, class-aware merging at 0.5, and SAHI's automatic switch to NMS at low confidence is turned off.

Images, held in memory (reading is not timed): `--scenes` built-in synthetic scenes tiled `--tile` x `--tile`
(640 px each, their ground truth tiled with them), and the first `--visdrone` images of the shared VisDrone
sample upscaled 2x. For each merge (NMS/IOU and GREEDYNMM/IOS) it prints images/s of tphyolo (slices batched by
`--batch`) and of SAHI at its default batch 1 and at `--batch`, the ratios (SAHI measured in the same run is the
baseline), the share of SAHI's detections that tphyolo matches (same class, IoU >= 0.9, one to one) and the
other way round -- against SAHI batched like tphyolo, since a batch of 8 and a batch of 1 round differently in the
network and a low threshold turns those roundings into different boxes (the batch-1 share is printed too) --
and mAP50 of both on the tiled scenes' ground truth.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from tphyolo.data.builtin.synthetic import render_scene
from tphyolo.data.files.image_io import read_image
from tphyolo.infer.slicing import SliceConfig
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.yolo import summarize
from tphyolo.models import build_model
from tphyolo.ops import box_iou
from tphyolo.predict.predictor import Predictor

SLICE, OVERLAP, MATCH = 640, 0.2, 0.5
MAX_DET = 100_000  # no cap on either side: per slice and per merged image alike
MERGES = {"NMS/IOU": ("NMS", "IOU", "nms", "iou"), "GREEDYNMM/IOS": ("GREEDYNMM", "IOS", "greedy-nmm", "ios")}
CLASSES = 6  # the synthetic scenes' classes


def tiled_scenes(count: int, tile: int, seed: int = 0) -> list[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
    """`count` images of tile x tile synthetic 640 px scenes: (BGR image, classes (m,), boxes (m, 4) xyxy)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        rows, classes, boxes = [], [], []
        for ty in range(tile):
            row = []
            for tx in range(tile):
                image, labels, _ = render_scene(rng, 640)
                row.append(image)
                classes.append(torch.from_numpy(labels.classes))
                boxes.append(torch.from_numpy(labels.boxes) + torch.tensor([tx, ty, tx, ty]) * 640.0)
            rows.append(np.concatenate(row, axis=1))
        out.append((np.concatenate(rows, axis=0), torch.cat(classes), torch.cat(boxes)))
    return out


def visdrone_upscaled(folder: Path, count: int) -> list[np.ndarray]:
    paths = sorted(folder.glob("*.jpg"))[:count]
    return [cv2.resize(read_image(p), None, fx=2, fy=2, interpolation=cv2.INTER_LINEAR) for p in paths]


def sahi_model(per_slice: Predictor, conf: float):
    """SAHI's custom-model class around a tphyolo Predictor (no slicing): each slice through tphyolo's network."""
    from sahi.models.base import DetectionModel
    from sahi.prediction import ObjectPrediction

    class TphyoloSliceModel(DetectionModel):
        def load_model(self) -> None:
            self.set_model(per_slice)

        def set_model(self, model, **kwargs) -> None:
            self.model = model
            self.category_mapping = {str(i): name for i, name in enumerate(model.names)}

        def perform_inference(self, image: np.ndarray) -> None:
            self._original_predictions = [self.model.predict_images([np.ascontiguousarray(image[..., ::-1])])[0]]

        def perform_batch_inference(self, images: list[np.ndarray]) -> None:  # one forward pass per batch
            bgr = [np.ascontiguousarray(image[..., ::-1]) for image in images]
            self._original_predictions = self.model.predict_images(bgr)
            self._batch_images = None

        def _create_object_prediction_list_from_original_predictions(self, shift_amount_list=None,
                                                                     full_shape_list=None) -> None:  # fmt: skip
            shifts = shift_amount_list or [[0, 0]] * len(self._original_predictions)
            if shifts and not isinstance(shifts[0], list | tuple):
                shifts = [shifts]
            shapes = full_shape_list or [None] * len(self._original_predictions)
            if shapes and shapes[0] is not None and not isinstance(shapes[0], list | tuple):
                shapes = [shapes]
            per_image = []
            for result, shift, shape in zip(self._original_predictions, shifts, shapes, strict=True):
                rows = result.rows()
                names = self.model.names
                per_image.append([
                    ObjectPrediction(bbox=r[:4].tolist(), category_id=int(r[5]), category_name=names[int(r[5])],
                                     score=float(r[4]), shift_amount=list(shift), full_shape=shape)
                    for r in rows if float(r[4]) >= self.confidence_threshold
                ])  # fmt: skip
            self._object_prediction_list_per_image = per_image

    return TphyoloSliceModel(confidence_threshold=conf, device="cpu")


def sahi_rows(model, image_bgr: np.ndarray, merge: str, match: str, batch: int) -> torch.Tensor:
    from sahi.predict import get_sliced_prediction

    result = get_sliced_prediction(
        np.ascontiguousarray(image_bgr[..., ::-1]), model, slice_height=SLICE, slice_width=SLICE,
        overlap_height_ratio=OVERLAP, overlap_width_ratio=OVERLAP, perform_standard_pred=False,
        postprocess_type=merge, postprocess_match_metric=match, postprocess_match_threshold=MATCH,
        postprocess_class_agnostic=False, verbose=0, batch_size=batch, force_postprocess_type=True,
    )  # fmt: skip
    rows = [[*p.bbox.to_xyxy(), p.score.value, p.category.id] for p in result.object_prediction_list]
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 6)


def agreement(ours: torch.Tensor, theirs: torch.Tensor, iou: float = 0.9) -> tuple[int, int, int]:
    """(matched, ours, theirs): one-to-one matches of the same class with IoU >= `iou`, greedy by their score."""
    if len(ours) == 0 or len(theirs) == 0:
        return 0, len(ours), len(theirs)
    overlap = box_iou(theirs[:, :4], ours[:, :4])
    overlap[theirs[:, 5, None] != ours[None, :, 5]] = 0
    taken = torch.zeros(len(ours), dtype=torch.bool)
    matched = 0
    for i in torch.argsort(theirs[:, 4], descending=True).tolist():
        candidates = overlap[i].clone()
        candidates[taken] = 0
        j = int(candidates.argmax())
        if candidates[j] >= iou:
            taken[j] = True
            matched += 1
    return matched, len(ours), len(theirs)


def map50(images, predictions) -> float:
    results = [ImageResult(f"scene{k}", image.shape[:2], rows, classes, boxes, torch.zeros(0, 4))
               for k, ((image, classes, boxes), rows) in enumerate(zip(images, predictions, strict=True))]  # fmt: skip
    return float(summarize(results, nc=CLASSES).map50)


def timed(run, images) -> tuple[list[torch.Tensor], float]:
    start = time.perf_counter()
    out = [run(image) for image in images]
    return out, len(images) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=2, help="tiled synthetic images")
    parser.add_argument("--tile", type=int, default=3, help="scenes per side of a tiled image (640 px each)")
    parser.add_argument("--visdrone", type=int, default=2, help="VisDrone images, upscaled 2x")
    parser.add_argument("--visdrone-dir", type=Path, default=Path("/work/shared/data/visdrone-mini/images"))
    parser.add_argument("--model", default="tph-yolov5n", help="an untrained built-in model (without --weights)")
    parser.add_argument("--weights", default=None, help="a trained checkpoint: mAP50 then means something")
    parser.add_argument(
        "--conf", type=float, default=0.001, help="confidence threshold of both (an untrained network scores < 0.003)"
    )
    parser.add_argument("--batch", type=int, default=8, help="slices per forward pass")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = args.weights or build_model(args.model, num_classes=CLASSES).eval()
    per_slice = Predictor(model, imgsz=SLICE, conf=args.conf, device="cpu", batch=args.batch, max_det=MAX_DET)
    scenes = tiled_scenes(args.scenes, args.tile)
    sets = {"tiled scenes": [s[0] for s in scenes], "VisDrone 2x": visdrone_upscaled(args.visdrone_dir, args.visdrone)}
    sahi = sahi_model(per_slice, args.conf)
    report = {}
    for label, (sahi_merge, sahi_match, merge, match) in MERGES.items():
        ours = Predictor(model, imgsz=SLICE, conf=args.conf, device="cpu", batch=args.batch, merge=merge, match=match,
                         merge_iou=MATCH, max_det=MAX_DET, slice=SliceConfig(SLICE, OVERLAP))  # fmt: skip
        ours.predict_images([sets["tiled scenes"][0]])  # warm-up, both sides
        sahi_rows(sahi, sets["tiled scenes"][0], sahi_merge, sahi_match, 1)
        for name, images in sets.items():
            mine, ours_rate = timed(lambda im: ours.predict_images([im])[0].rows(), images)  # noqa: B023
            theirs, sahi_rate = timed(lambda im: sahi_rows(sahi, im, sahi_merge, sahi_match, 1), images)  # noqa: B023
            batched, sahi_batched = timed(lambda im: sahi_rows(sahi, im, sahi_merge, sahi_match, args.batch), images)  # noqa: B023
            counts = np.array([agreement(a, b) for a, b in zip(mine, batched, strict=True)]).sum(0)
            unbatched = np.array([agreement(a, b) for a, b in zip(mine, theirs, strict=True)]).sum(0)
            row = {"images": len(images), "tphyolo img/s": ours_rate, "SAHI img/s (batch 1)": sahi_rate,
                   f"SAHI img/s (batch {args.batch})": sahi_batched, "ratio vs SAHI batch 1": ours_rate / sahi_rate,
                   f"ratio vs SAHI batch {args.batch}": ours_rate / sahi_batched,
                   "SAHI boxes matched": counts[0] / max(counts[2], 1),
                   "tphyolo boxes matched": counts[0] / max(counts[1], 1),
                   "boxes (tphyolo, SAHI)": [int(counts[1]), int(counts[2])],
                   "SAHI batch 1 boxes matched": unbatched[0] / max(unbatched[2], 1)}  # fmt: skip
            if name == "tiled scenes":
                row |= {"mAP50 tphyolo": map50(scenes, mine), "mAP50 SAHI": map50(scenes, theirs)}
            report[f"{label}, {name}"] = row
            print(f"\n## {label}, {name}")
            for key, value in row.items():
                print(f"- {key}: {value:.4g}" if isinstance(value, float) else f"- {key}: {value}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, default=float))


if __name__ == "__main__":
    main()

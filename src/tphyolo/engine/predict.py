"""Batched inference from a model or checkpoints, with test-time augmentation, sliced inference and ensembles.

    predictor = Predictor("best.pt", imgsz=1536, conf=0.25, tta=True, slice=1024)
    for detections in predictor("images/"):
        detections.boxes  # (N, 4) xyxy in original-image pixels

How one image is processed: it is cut into windows (the whole image unless slicing), each window is
letterboxed to `imgsz` (long side; short side padded to a stride multiple) and run through every model with
every TTA pass; each run is suppressed by NMS on its own and mapped back to original pixels. The runs of one
(model, pass) over all windows form one detection list; the lists of an image are merged by WBF (weights: the
per-model weights) or by NMS. An image with one window and one list is not merged at all, so plain
inference, TTA with the identity pass only, and slicing of an image that fits in one slice all give the
same detections.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torchvision.ops import batched_nms

from tphyolo.data.letterbox import letterbox
from tphyolo.engine.slicing import SliceConfig, slice_windows
from tphyolo.engine.sources import Frame, iter_frames, resolve_source
from tphyolo.engine.tta import PLAIN, TTAConfig, augment, unaugment
from tphyolo.ops import clip_boxes, non_max_suppression, unletterbox
from tphyolo.ops.wbf import weighted_boxes_fusion
from tphyolo.runtime import RuntimeConfig, autocast, resolve_device, sdpa_context

MERGE_METHODS = ("wbf", "nms")


@dataclass(frozen=True)
class Detections:
    """Detections of one image: boxes (N, 4) float32 xyxy in original-image pixels, scores (N,) float32,
    labels (N,) int64 class ids; sorted by descending score."""

    boxes: torch.Tensor
    scores: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.scores)

    @classmethod
    def from_rows(cls, rows: torch.Tensor) -> Detections:
        """From (N, 6) rows x1, y1, x2, y2, score, class."""
        rows = rows.detach().float().cpu()
        return cls(rows[:, :4].contiguous(), rows[:, 4].contiguous(), rows[:, 5].long())


def load_models(
    weights: str | Path | nn.Module | Sequence[str | Path | nn.Module],
) -> tuple[list[nn.Module], list[str]]:
    """Models (eval mode, on CPU for checkpoints) and the class names they share.

    `weights` is a model, a checkpoint path (tphyolo or original TPH-YOLOv5/YOLOv5 format) or a sequence of
    them. Raises ValueError when the models disagree on the number of classes.
    """
    from tphyolo.checkpoint import load_checkpoint

    entries = list(weights) if isinstance(weights, (list, tuple)) else [weights]
    if not entries:
        raise ValueError("no weights given")
    models, names = [], None
    for entry in entries:
        if isinstance(entry, nn.Module):
            model, model_names = entry, list(getattr(entry, "names", []))
        else:
            checkpoint = load_checkpoint(entry)
            model, model_names = checkpoint.build_model(), list(checkpoint.names)
        if names is None:
            names = model_names
        elif len(model_names) != len(names):
            raise ValueError(f"{entry}: {len(model_names)} classes, but the first model has {len(names)}")
        models.append(model.eval())
    return models, names or []


def detect_passes(
    model: nn.Module,
    x: torch.Tensor,
    *,
    tta: TTAConfig,
    stride: int,
    conf: float,
    iou: float,
    max_det: int,
    classes: Sequence[int] | None = None,
    agnostic: bool = False,
) -> list[list[torch.Tensor]]:
    """Run every TTA pass of `x` (B, 3, H, W) in [0, 1] through `model` (eval mode); call under no_grad.

    Returns [pass][image] (n, 6) tensors x1, y1, x2, y2, score, class in the pixels of `x`.
    """
    out = []
    for scale, flip in tta.passes():
        if (scale, flip) == (1.0, "none"):
            prediction = model(x)
        else:
            xa, geometry = augment(x, scale=scale, flip=flip, stride=stride)
            prediction = unaugment(model(xa), geometry)
        out.append(
            non_max_suppression(
                prediction.float(),
                conf_thres=conf,
                iou_thres=iou,
                classes=classes,
                agnostic=agnostic,
                max_det=max_det,
            )
        )
    return out


def merge_detections(
    lists: Sequence[torch.Tensor],
    *,
    method: str,
    width: float,
    height: float,
    iou: float,
    max_det: int,
    weights: Sequence[float] | None = None,
    agnostic: bool = False,
) -> torch.Tensor:
    """Merge several (n_i, 6) detection lists of one width x height image (pixels) into one (n, 6) list.

    "wbf": weighted boxes fusion with `iou` as its threshold and `weights` per list (boxes are normalised for
    the fusion and scaled back); "nms": the union suppressed per class (or across classes, `agnostic`).
    Result sorted by descending score, at most `max_det` rows.
    """
    if method not in MERGE_METHODS:
        raise ValueError(f"unknown merge method {method!r}; known: {list(MERGE_METHODS)}")
    device = lists[0].device if lists else torch.device("cpu")
    if method == "nms":
        rows = torch.cat(list(lists)) if lists else torch.zeros((0, 6), device=device)
        groups = torch.zeros_like(rows[:, 5]) if agnostic else rows[:, 5]
        keep = batched_nms(rows[:, :4].float(), rows[:, 4].float(), groups.long(), iou)[:max_det]
        return rows[keep]
    scale = torch.tensor([width, height, width, height], dtype=torch.float64)
    boxes, scores, labels = weighted_boxes_fusion(
        [(r[:, :4].double().cpu() / scale).numpy() for r in lists],
        [r[:, 4].double().cpu().numpy() for r in lists],
        [r[:, 5].double().cpu().numpy() for r in lists],
        weights=weights,
        iou_thr=iou,
        conf_type="avg",
    )
    rows = torch.from_numpy(np.concatenate([boxes * scale.numpy(), scores[:, None], labels[:, None]], axis=1))
    rows = rows[:max_det].float().reshape(-1, 6)
    rows[:, :4] = clip_boxes(rows[:, :4], width=width, height=height)  # undo rounding past the edges
    return rows.to(device)


def _model_stride(model: nn.Module) -> int:
    stride = getattr(model, "stride", None)
    if stride is None:
        raise ValueError(f"{type(model).__name__} has no `stride`: not a detection model")
    return int(torch.as_tensor(stride).max())


class Predictor:
    """Detects objects in images with one model or an ensemble.

    weights: a model, a checkpoint path, or a sequence of them (an ensemble; `model_weights` gives each
    model's WBF weight, default 1). imgsz: network input size (long side) of each image or slice.
    conf, iou: NMS thresholds of each run; max_det: most detections per image. classes: keep only these ids.
    tta: True (the paper's scales, no flip and left-right flip) or a TTAConfig; slice: a window size in
    original pixels or a SliceConfig. merge: "wbf" or "nms" for combining runs; merge_iou: its IoU threshold
    (default 0.55 for WBF, `iou` for NMS). device / runtime: where and how to run (runtime's device when
    `device` is None; the runtime's channels_last and compile apply); half: fp16 weights and inputs, no autocast
    (CUDA only). batch_size: images or slices per forward.
    fuse: fold BatchNorm into convolutions first.

    Calling it on a source (path, folder, glob, .txt list, video, or a sequence of paths) or on uint8 BGR
    (H, W, 3) arrays returns one `Detections` per image or video frame.
    """

    def __init__(
        self,
        weights: str | Path | nn.Module | Sequence[str | Path | nn.Module],
        *,
        imgsz: int = 640,
        conf: float = 0.25,
        iou: float = 0.45,
        max_det: int = 500,
        classes: Sequence[int] | None = None,
        agnostic: bool = False,
        tta: bool | TTAConfig | None = None,
        slice: int | SliceConfig | None = None,  # noqa: A002 - the public keyword is `slice`
        merge: str = "wbf",
        merge_iou: float | None = None,
        model_weights: Sequence[float] | None = None,
        device: str | torch.device | None = None,
        runtime: RuntimeConfig | None = None,
        half: bool = False,
        batch_size: int = 1,
        fuse: bool = True,
    ) -> None:
        if merge not in MERGE_METHODS:
            raise ValueError(f"unknown merge method {merge!r}; known: {list(MERGE_METHODS)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.runtime = runtime or RuntimeConfig()
        self.device = resolve_device(str(device)) if device is not None else self.runtime.torch_device()
        if half and self.device.type != "cuda":
            raise ValueError(f"half precision needs a CUDA device, got {self.device}")
        if half:  # fp16 weights run as they are, without autocast
            self.runtime = dataclasses.replace(self.runtime, amp="off")
        models, self.names = load_models(weights)
        if model_weights is not None and len(model_weights) != len(models):
            raise ValueError(f"{len(model_weights)} model weights for {len(models)} models")
        self.model_weights = list(model_weights) if model_weights is not None else [1.0] * len(models)
        self.stride = max(_model_stride(m) for m in models)
        if imgsz % self.stride:
            raise ValueError(f"imgsz {imgsz} must be a multiple of the largest stride {self.stride}")
        self.models = [self._prepare(m, fuse=fuse, half=half) for m in models]
        self.imgsz, self.conf, self.iou, self.max_det = imgsz, conf, iou, max_det
        self.classes, self.agnostic, self.half, self.batch_size = classes, agnostic, half, batch_size
        self.tta = TTAConfig() if tta is True else (tta or PLAIN)
        self.slicing = SliceConfig(slice) if isinstance(slice, int) else slice
        self.merge = merge
        self.merge_iou = merge_iou if merge_iou is not None else (0.55 if merge == "wbf" else iou)

    def _prepare(self, model: nn.Module, *, fuse: bool, half: bool) -> nn.Module:
        if fuse and hasattr(model, "fuse"):
            model = model.fuse()
        model = model.to(self.device).eval()
        if half:
            model = model.half()
        if self.runtime.channels_last:
            model = model.to(memory_format=torch.channels_last)
        if self.runtime.compile != "off":
            model = torch.compile(model, mode=self.runtime.compile)  # compiled on the first call of each shape
        return model

    def __call__(self, source: str | Path | np.ndarray | Sequence) -> list[Detections]:
        """Detections of every image of `source` (see the class docstring), in order."""
        if isinstance(source, np.ndarray):
            return self.predict_images([source])
        if isinstance(source, (list, tuple)) and source and isinstance(source[0], np.ndarray):
            return self.predict_images(list(source))
        return [detections for _, detections in self.stream(source)]

    def stream(self, source: str | Path | Sequence[str | Path]) -> Iterator[tuple[Frame, Detections]]:
        """Each frame of `source` with its detections, `batch_size` frames at a time."""
        batch: list[Frame] = []
        for frame in iter_frames(resolve_source(source)):
            batch.append(frame)
            if len(batch) == self.batch_size:
                yield from zip(batch, self.predict_images([f.image for f in batch]), strict=True)
                batch = []
        if batch:
            yield from zip(batch, self.predict_images([f.image for f in batch]), strict=True)

    @torch.inference_mode()
    def predict_images(self, images: Sequence[np.ndarray]) -> list[Detections]:
        """Detections of uint8 BGR (H, W, 3) images, in original pixels."""
        views = []  # (image index, window)
        for i, image in enumerate(images):
            if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
                raise ValueError(f"image {i}: expected uint8 (H, W, 3), got {image.dtype} {image.shape}")
            h, w = image.shape[:2]
            windows = slice_windows(h, w, self.slicing) if self.slicing else [(0, 0, w, h)]
            views += [(i, window) for window in windows]
        runs = self._run_views(images, views)  # [model][pass][view] (n, 6) original pixels
        out = []
        for i, image in enumerate(images):
            mine = [v for v, (j, _) in enumerate(views) if j == i]
            lists, weights = [], []
            for model_runs, weight in zip(runs, self.model_weights, strict=True):
                for pass_runs in model_runs:
                    lists.append(torch.cat([pass_runs[v] for v in mine]))
                    weights.append(weight)
            if len(lists) == 1 and len(mine) == 1:
                rows = lists[0]
            else:
                h, w = image.shape[:2]
                rows = merge_detections(
                    lists,
                    method=self.merge,
                    width=w,
                    height=h,
                    iou=self.merge_iou,
                    max_det=self.max_det,
                    weights=weights,
                    agnostic=self.agnostic,
                )
            out.append(Detections.from_rows(rows))
        return out

    def _run_views(self, images: Sequence[np.ndarray], views: list) -> list[list[list[torch.Tensor]]]:
        """Every model and pass on every view; [model][pass][view] (n, 6) rows in original-image pixels."""
        boxed = []
        for i, (x1, y1, x2, y2) in views:
            crop, info = letterbox(images[i][y1:y2, x1:x2], self.imgsz, stride=self.stride, auto=True)
            boxed.append((crop, info))
        n_passes = len(self.tta.passes())
        runs = [[[None] * len(views) for _ in range(n_passes)] for _ in self.models]
        by_shape: dict[tuple[int, ...], list[int]] = {}
        for v, (crop, _) in enumerate(boxed):
            by_shape.setdefault(crop.shape, []).append(v)
        dtype = torch.float16 if self.half else torch.float32
        for members in by_shape.values():
            for start in range(0, len(members), self.batch_size):
                chunk = members[start : start + self.batch_size]
                array = np.stack([boxed[v][0] for v in chunk])[..., ::-1].transpose(0, 3, 1, 2)  # BGR -> RGB, NCHW
                x = torch.from_numpy(np.ascontiguousarray(array)).to(self.device).to(dtype) / 255.0  # (B, 3, H, W)
                if self.runtime.channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                for m, model in enumerate(self.models):
                    with autocast(self.runtime, self.device), sdpa_context(self.runtime):
                        passes = detect_passes(
                            model,
                            x,
                            tta=self.tta,
                            stride=self.stride,
                            conf=self.conf,
                            iou=self.iou,
                            max_det=self.max_det,
                            classes=self.classes,
                            agnostic=self.agnostic,
                        )
                    for p, per_image in enumerate(passes):
                        for v, rows in zip(chunk, per_image, strict=True):
                            runs[m][p][v] = self._to_original(rows, views[v][1], boxed[v][1])
        return runs

    @staticmethod
    def _to_original(rows: torch.Tensor, window: tuple[int, int, int, int], info) -> torch.Tensor:
        """(n, 6) rows in letterboxed-window pixels -> original-image pixels, clipped to the window."""
        x1, y1, x2, y2 = window
        rows = rows.float().clone()
        rows[:, :4] = unletterbox(
            rows[:, :4], ratio=info.ratio, pad=info.pad, width=x2 - x1, height=y2 - y1, offset=(x1, y1)
        )
        return rows

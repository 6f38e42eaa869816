"""Whether a checkpoint compiled to OpenVINO should compute in bf16 on this machine: the check `tphyolo doctor
--tune --weights W` runs and keeps beside the compiled model, which `--precision auto` then reads
(`tphyolo.infer.backends.compiled.kept_precision`). Loading a model never runs it.

On CPUs with native bf16 (AMX-BF16 or AVX512-BF16, `tphyolo.runtime.cpu_isa`) OpenVINO can compute in bf16:
faster, but not exact. The check keeps bf16 only where both of these held for this model on this machine:

- speed: bf16's forward of one CHECK_SIZE image at least MIN_SPEEDUP times as fast as f32's (medians of up to
  MAX_ROUNDS interleaved timings, `tphyolo.runtime.interleaved`, after a warm-up each, none started once BUDGET_S
  seconds have gone);
- accuracy, on CHECK_IMAGES scenes of the built-in synthetic val split (`tphyolo.data.builtin.synthetic`,
  rendered at CHECK_SIZE): bf16's mAP50 against the scenes' labels within MAP50_TOLERANCE of f32's ("the
  built-in set") when the model's classes are the set's and its f32 mAP50 there is at least INFORMATIVE_MAP50.
  Otherwise (a model trained on VisDrone sees nothing it knows in synthetic scenes) f32's confident detections
  (score >= PREDICT_CONF, or its REFERENCE_PER_IMAGE best per scene where its scores stay lower,
  `reference_floor`) are the labels, and bf16's detections must score a mAP50 against them of at least
  MIN_AGREEMENT times f32's own ("agreement with f32": 1 for identical detections). With fewer than
  MIN_REFERENCE boxes to score against nothing can be said, and f32 stands.

The verdict is kept with the load average it was timed under; `tphyolo doctor --tune` says when that was a busy
machine. Without native bf16 nothing is checked: bf16 there is emulated, slower.

Where the numbers come from: MAP50_TOLERANCE is the 0.005 within which this project counts a lower precision as
harmless (`tphyolo.runtime.decisions`); MIN_AGREEMENT asks bf16 to reproduce f32's own detections to within the
same half a percent. 8 scenes at 320 px (the README main job's size) hold about 115 objects (8 to 21 each, hence
REFERENCE_PER_IMAGE 15); the check took 9 to 28 s for tph-yolov5n on a 2-core EPYC. MIN_SPEEDUP: below a tenth
faster, exactness is worth more than the time.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from tphyolo.cores import available_cores
from tphyolo.data.builtin.synthetic import NAMES as BUILTIN_NAMES
from tphyolo.data.builtin.synthetic import split_scene
from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.infer.backends.base import ExportedBackend
from tphyolo.infer.backends.compiled import PRECISION_FILE, RUNTIMES, cache_entry, load_compiled, precision_machine
from tphyolo.infer.backends.openvino import OpenVINOBackend
from tphyolo.infer.config import NMS_IOU, PREDICT_CONF, VAL_CONF
from tphyolo.metrics.ap import DetectionStats
from tphyolo.ops.nms import non_max_suppression
from tphyolo.runtime.cpu_isa import CpuInfo, cpu_info
from tphyolo.runtime.decisions import machine_load
from tphyolo.runtime.interleaved import time_interleaved

LOGGER = logging.getLogger("tphyolo")
FILE = "precision.json"
CHECK_IMAGES = 8  # scenes of the built-in val split scored in each precision
CHECK_SIZE = 320  # their side, pixels
MIN_SPEEDUP = 1.10  # how much faster than f32 bf16 must run
MAP50_TOLERANCE = 0.005  # how much mAP50 bf16 may lose on the built-in set
MIN_AGREEMENT = 0.995  # bf16's mAP50 against f32's detections, where the built-in set says nothing
INFORMATIVE_MAP50 = 0.3  # below this f32 mAP50 on the built-in set, the model does not know the set
MIN_REFERENCE = 20  # boxes to score against, at least
REFERENCE_PER_IMAGE = 15  # f32 boxes per scene the agreement scores against, at least where it has them
MAX_ROUNDS = 5
BUDGET_S = 5.0
MAX_DET = 300  # detections kept per scene (they hold at most 22 objects)

OpenAt = Callable[[str], ExportedBackend]  # the compiled model computing in a precision ("fp32" or "bf16")


@dataclass(frozen=True)
class Bf16Verdict:
    """The check's answer: `precision` ("bf16" or "fp32"), bf16's `speedup` over f32, the `basis` of the accuracy
    comparison ("built-in set", "agreement with f32", "too few boxes", or "not compared" when the speed already
    said no), `f32_map50` and `bf16_map50` on it (for the agreement, both against f32's detections), the
    `machine` checked and, once kept, when and under what load it was `measured` ({"date", "load", "cores"})."""

    precision: str
    speedup: float
    basis: str
    f32_map50: float | None
    bf16_map50: float | None
    machine: str
    measured: dict[str, Any] | None = None

    @property
    def agreement(self) -> float:
        """bf16's mAP50 against f32's detections over f32's own (the most an exact copy scores, 0.995 with the
        101-point AP): 1 for detections identical to f32's."""
        return self.bf16_map50 / self.f32_map50

    def line(self) -> str:
        """One line: the choice, why, and the flag that forces the other."""
        speed = f"{self.speedup:.2f}x f32 here"
        if self.precision == "bf16":
            if self.basis == "built-in set":
                accuracy = f"mAP50 within {self.f32_map50 - self.bf16_map50:.3f} on the built-in set"
            else:
                accuracy = (f"its detections agree with f32's to {self.agreement:.3f} (mAP50 against them; the "
                            "model knows too little of the built-in set to score against its labels)")  # fmt: skip
            return f"OpenVINO bf16: {speed}, {accuracy}; --precision fp32 forces exact"
        if self.basis == "not compared":
            why = f"bf16 only {speed} (needs {MIN_SPEEDUP:.2f}x)"
        elif self.basis == "too few boxes":
            why = f"bf16 {speed}, but too few detections on the built-in set to check its accuracy"
        elif self.basis == "built-in set":
            why = (f"bf16 {speed}, but mAP50 {self.f32_map50 - self.bf16_map50:.3f} lower on the built-in set "
                   f"(allowed {MAP50_TOLERANCE})")  # fmt: skip
        else:
            why = (f"bf16 {speed}, but its detections agree with f32's only to {self.agreement:.3f} (mAP50 "
                   f"against them; needs {MIN_AGREEMENT})")  # fmt: skip
        return f"OpenVINO f32: {why}; --precision bf16 forces it"


def speedup(f32: ExportedBackend, bf16: ExportedBackend, *, clock: Callable[[], float] = time.perf_counter) -> float:
    """f32's median seconds per forward of one CHECK_SIZE image over bf16's, timed interleaved
    (`tphyolo.runtime.interleaved`) by `clock`."""
    scene = split_scene("val", 0, imgsz=CHECK_SIZE)[0]
    x = f32.prepare(_as_batch([scene]))
    samples = time_interleaved([lambda: f32.run(x), lambda: bf16.run(x)], rounds=MAX_ROUNDS, budget_s=BUDGET_S,
                               clock=clock)  # fmt: skip
    return statistics.median(samples[0]) / statistics.median(samples[1])


def detections(backend: ExportedBackend, images: Sequence[np.ndarray]) -> list[torch.Tensor]:
    """`backend`'s detections (n, 6) x1, y1, x2, y2, score, class of each BGR image, as validation keeps them."""
    with torch.no_grad():
        out = backend.run(backend.prepare(_as_batch(images)))
    return non_max_suppression(out.float(), conf_thres=VAL_CONF, iou_thres=NMS_IOU, max_det=MAX_DET)


def map50(found: Sequence[torch.Tensor], labels: Sequence[torch.Tensor], num_classes: int) -> float:
    """mAP50 of `found` (per image (n, 6)) against `labels` (per image (m, 5) class, x1, y1, x2, y2)."""
    stats = DetectionStats(num_classes, iou_thresholds=torch.tensor([0.5]))
    for rows, truth in zip(found, labels, strict=True):
        stats.update(rows, truth)
    return stats.summarize().map50


def reference_floor(f32: Sequence[torch.Tensor]) -> float:
    """The score from which f32's detections are the labels of the agreement: PREDICT_CONF, or lower for a model
    whose scores stay low (one with random weights, or far from its data), down to the score of its
    REFERENCE_PER_IMAGE x images best detection, about as many boxes as the scenes hold objects. One threshold
    over all images, so that f32 scores exactly 1 against its own detections."""
    scores = torch.cat([rows[:, 4] for rows in f32]).sort(descending=True).values
    if not len(scores):
        return PREDICT_CONF
    return min(PREDICT_CONF, float(scores[min(len(scores), REFERENCE_PER_IMAGE * len(f32)) - 1]))


def compare(f32: list[torch.Tensor], bf16: list[torch.Tensor], labels: list[torch.Tensor] | None,
            num_classes: int) -> tuple[str, float, float]:  # fmt: skip
    """(basis, f32 mAP50, bf16 mAP50) of the accuracy comparison (module docstring): against `labels` (None when
    the model's classes are not the built-in set's) where f32 scores at least INFORMATIVE_MAP50 there, else
    against f32's confident detections; "too few boxes" when there are fewer than MIN_REFERENCE to score."""
    if labels is not None and sum(len(t) for t in labels) >= MIN_REFERENCE:
        own = map50(f32, labels, num_classes)
        if own >= INFORMATIVE_MAP50:
            return "built-in set", own, map50(bf16, labels, num_classes)
    floor = reference_floor(f32)
    reference = [torch.cat([rows[rows[:, 4] >= floor][:, 5:6], rows[rows[:, 4] >= floor][:, :4]], 1) for rows in f32]
    if sum(len(t) for t in reference) < MIN_REFERENCE:
        return "too few boxes", float("nan"), float("nan")
    return "agreement with f32", map50(f32, reference, num_classes), map50(bf16, reference, num_classes)


def check_bf16(open_at: OpenAt, *, machine: str, clock: Callable[[], float] = time.perf_counter) -> Bf16Verdict:
    """The verdict for the compiled model `open_at` opens in each precision (module docstring), timed by `clock`."""
    f32, bf16 = open_at("fp32"), open_at("bf16")
    names = f32.names
    gain = speedup(f32, bf16, clock=clock)
    if gain < MIN_SPEEDUP:
        return Bf16Verdict("fp32", round(gain, 3), "not compared", None, None, machine)
    scenes = [split_scene("val", i, imgsz=CHECK_SIZE) for i in range(CHECK_IMAGES)]
    images = [image for image, _, _ in scenes]
    labels = None
    if tuple(names) == BUILTIN_NAMES:
        labels = [torch.cat([torch.as_tensor(truth.classes, dtype=torch.float32)[:, None],
                             torch.as_tensor(truth.boxes)], 1) for _, truth, _ in scenes]  # fmt: skip
    basis, f32_map50, bf16_map50 = compare(detections(f32, images), detections(bf16, images), labels, len(names))
    good = {"built-in set": f32_map50 - bf16_map50 <= MAP50_TOLERANCE,
            "agreement with f32": bf16_map50 >= MIN_AGREEMENT * f32_map50}  # fmt: skip
    precision = "bf16" if good.get(basis, False) else "fp32"
    rounded = [None if np.isnan(v) else round(v, 4) for v in (f32_map50, bf16_map50)]
    return Bf16Verdict(precision, round(gain, 3), basis, *rounded, machine)


def tune_precision(
    weights: str | Path, *, threads: int | None = None, cpu: CpuInfo | None = None,
    clock: Callable[[], float] = time.perf_counter, load: tuple[float, int] | None = None,
) -> Bf16Verdict | None:  # fmt: skip
    """Check checkpoint `weights` compiled to OpenVINO in bf16 against f32 on this machine (`cpu`, default this
    one; `threads`, default the cores this process may use) and keep the verdict beside the compiled model, where
    `--precision auto` reads it (`compiled.kept_precision`), with the load average and cores at the time (`load`,
    default now). None, keeping nothing, on a CPU without native bf16 or when the compiled model is not within
    tolerance of PyTorch (PyTorch runs it then)."""
    cpu = cpu if cpu is not None else cpu_info()
    threads = threads or available_cores()
    if not cpu.has_native_bf16 or load_compiled(weights, precision="fp32", threads=threads, cpu=cpu) is None:
        return None
    spec = RUNTIMES["openvino"]
    entry = cache_entry(Path(weights), runtime=spec.name, fuse=True)

    def open_at(precision: str) -> ExportedBackend:
        return OpenVINOBackend(entry / spec.file, device=torch.device("cpu"), threads=threads, precision=precision)

    verdict = check_bf16(open_at, machine=precision_machine(cpu, threads), clock=clock)
    load_now, cores = load if load is not None else machine_load()
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime())
    verdict = replace(verdict, measured={"date": when, "load": load_now, "cores": cores})
    write_text_atomic(entry / PRECISION_FILE, json.dumps(asdict(verdict), indent=1) + "\n")
    return verdict


def _as_batch(images: Sequence[np.ndarray]) -> torch.Tensor:
    """(B, 3, H, W) uint8 RGB from BGR (H, W, 3) images of one size."""
    rgb = np.stack([cv2.cvtColor(image, cv2.COLOR_BGR2RGB) for image in images])
    return torch.from_numpy(rgb).permute(0, 3, 1, 2).contiguous()

"""Our ByteTrack, BoT-SORT and OC-SORT against BoxMOT's on the same detections: HOTA, IDF1, MOTA, IDSW, speed.

    python benchmarks/tracking_vs_boxmot.py                  # UAVDT M0101 from the shared folder, 3 noise seeds
    python benchmarks/tracking_vs_boxmot.py --gt path/M0101_gt_whole.txt --seeds 0 1 2 3 4 --json out.json

The detections are made from real drone trajectories without pixels (UAVDT M0101: 407 frames, 5414 boxes): each
true box is dropped with probability --drop (more when UAVDT marks it occluded or out of view), moved and
resized by Gaussian noise of --jitter times its size, and scored from N(0.72, 0.15) (less for the occluded);
--fp false positives per frame on average are added, with sizes of true boxes and low scores. Each seed makes
one detection set; every tracker tracks the same sets. Both libraries run without camera-motion compensation
(there are no pixels) and without appearance features, with our presets' thresholds. BoxMOT's ByteTrack has no
threshold of its own for starting a track (it starts them at the high threshold, where our preset starts them
0.1 higher, as ByteTrack's code does) and uses the xyah Kalman state: two rows run ours with its rule, the second
with its Kalman state too; the others run our presets (BoxMOT's OC-SORT gets every setting of ours). Scores use the
UAVDT protocol of `tphyolo eval --task track` (class-agnostic, ignore regions of M0101_gt_ignore.txt).

Speed is the tracker alone (detections in memory): each tracker runs the whole sequence in turn, ours and
BoxMOT's alternating, --repeats times; the median frames per second is reported (per wall-clock second and per
second of this process's CPU time, which other processes on a busy machine disturb less), and the ratio of ours
to BoxMOT's. A second scene measures the speed at 100 boxes per frame (100 objects moving for 300 frames).

BoxMOT is a baseline only: it is imported here and nowhere in the package or the tests (`pip install boxmot`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.uavdt import read_uavdt
from tphyolo.metrics.track_protocols import prepare
from tphyolo.metrics.tracking import score_sequences
from tphyolo.track.config import TRACKER_PRESETS
from tphyolo.track.ocsort import OCSortConfig
from tphyolo.track.registry import make_tracker

SHARED = Path(os.environ.get("TPHYOLO_SHARED", Path(__file__).resolve().parents[2] / "shared"))
DEFAULT_GT = SHARED / "data" / "other" / "uavdt-gt-only" / "M0101_gt_whole.txt"
FIELDS = ("HOTA", "AssA", "DetA", "IDF1", "MOTA", "IDSW", "FP", "FN")
# OC-SORT's published thresholds (det_thresh 0.6, min_hits 3) report few boxes of these detections' scores
OCSORT_FOR_DRONES = {"det_thresh": 0.5, "use_byte": True, "min_hits": 1}
# row -> (library, tracker, overrides: ours, or for BoxMOT's OC-SORT the settings of ours it gets)
VARIANTS = {
    "ours bytetrack (preset)": ("ours", "bytetrack", {}),
    "ours bytetrack, tracks started at the high threshold": ("ours", "bytetrack", {"new_track_thresh": 0.5}),
    "ours bytetrack, BoxMOT's settings (also xyah)": ("ours", "bytetrack", {"motion": "xyah", "new_track_thresh": 0.5}),
    "BoxMOT bytetrack": ("boxmot", "bytetrack", {}),
    "ours botsort": ("ours", "botsort", {}),
    "BoxMOT botsort": ("boxmot", "botsort", {}),
    "ours ocsort": ("ours", "ocsort", {}),
    "BoxMOT ocsort": ("boxmot", "ocsort", {}),
    "ours ocsort, BYTE, det_thresh 0.5, min_hits 1": ("ours", "ocsort", OCSORT_FOR_DRONES),
    "BoxMOT ocsort, BYTE, det_thresh 0.5, min_hits 1": ("boxmot", "ocsort", OCSORT_FOR_DRONES),
}
SPEED_TRACKERS = ("bytetrack", "botsort", "ocsort")


def noisy_detections(truth: TrackTable, *, seed: int, drop: float, jitter: float, fp: float) -> TrackTable:
    """Detections (id -1, score, class = UAVDT category) simulated from `truth` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    hard = (truth.occlusion >= 2) | (truth.truncation >= 2)  # UAVDT: occluded or partly out of view
    keep = rng.random(len(truth)) > np.where(hard, 2.5 * drop, drop)
    truth = truth.select(keep)
    size = np.tile(truth.boxes[:, 2:] - truth.boxes[:, :2], 2)
    boxes = truth.boxes + rng.normal(0, jitter, truth.boxes.shape) * size
    boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2] + 2)
    scores = rng.normal(0.72, 0.15, len(truth)) - np.where(hard[keep], 0.15, 0.0)
    last = truth.last_frame
    n_fp = rng.poisson(fp * last)
    fp_frames = rng.integers(1, last + 1, n_fp)
    fp_size = (truth.boxes[:, 2:] - truth.boxes[:, :2])[rng.integers(0, len(truth), n_fp)]
    fp_corner = rng.uniform(0, 1, (n_fp, 2)) * (np.array([1024, 540]) - fp_size)
    fp_boxes = np.concatenate([fp_corner, fp_corner + fp_size], axis=1)
    fp_scores = rng.uniform(0.1, 0.65, n_fp)
    return TrackTable.from_columns(
        np.concatenate([truth.frames, fp_frames]), None, np.concatenate([boxes, fp_boxes]),
        np.clip(np.concatenate([scores, fp_scores]), 0.01, 1.0), np.concatenate([truth.classes, np.ones(n_fp)]),
    )  # fmt: skip


def per_frame(detections: TrackTable, length: int) -> list[np.ndarray]:
    """(N, 6) rows x1, y1, x2, y2, score, class for each frame 1..length."""
    frames = [np.zeros((0, 6)) for _ in range(length)]
    for frame, rows in detections.by_frame():
        frames[frame - 1] = np.column_stack([rows.boxes, rows.scores, rows.classes - 1])
    return frames


def run_ours(name: str, frames: list[np.ndarray], **overrides) -> tuple[TrackTable, float, float]:
    """(output, wall seconds, CPU seconds) of our tracker `name` (no camera-motion compensation)."""
    tracker = make_tracker(name, **(({"cmc": "none"} if name in TRACKER_PRESETS else {}) | overrides))
    out = []
    start, cpu = time.perf_counter(), time.process_time()
    for t, rows in enumerate(frames, start=1):
        tracks = tracker.update(rows[:, :4], rows[:, 4], rows[:, 5])
        out.append((t, tracks.ids, tracks.boxes, tracks.scores))
    return _table(out), time.perf_counter() - start, time.process_time() - cpu


def boxmot_tracker(name: str, **overrides):
    """BoxMOT's tracker with our preset's thresholds, no camera-motion compensation, no appearance; OC-SORT
    with every setting of ours (`overrides` change OCSortConfig's)."""
    from boxmot import BotSort, ByteTrack, OcSort

    if name == "ocsort":
        cfg = replace(OCSortConfig(), **overrides)
        return OcSort(det_thresh=cfg.det_thresh, min_conf=cfg.low_thresh, iou_threshold=cfg.iou_threshold,
                      max_age=cfg.max_age, min_hits=cfg.min_hits, delta_t=cfg.delta_t, inertia=cfg.inertia,
                      use_byte=cfg.use_byte, asso_func="iou")  # fmt: skip
    preset = TRACKER_PRESETS[name]
    if name == "bytetrack":
        return ByteTrack(min_conf=preset.track_low_thresh, track_thresh=preset.track_high_thresh,
                         match_thresh=preset.match_thresh, track_buffer=preset.track_buffer, frame_rate=30)  # fmt: skip
    return BotSort(track_high_thresh=preset.track_high_thresh, track_low_thresh=preset.track_low_thresh,
                   new_track_thresh=preset.new_track_thresh, track_buffer=preset.track_buffer,
                   match_thresh=preset.match_thresh, use_cmc=False, use_embeddings=False, frame_rate=30)  # fmt: skip


def run_boxmot(name: str, frames: list[np.ndarray], image: np.ndarray, **overrides) -> tuple[TrackTable, float, float]:
    """(output, wall seconds, CPU seconds) of BoxMOT's tracker `name`."""
    tracker = boxmot_tracker(name, **overrides)
    out = []
    start, cpu = time.perf_counter(), time.process_time()
    for t, rows in enumerate(frames, start=1):
        tracks = np.asarray(tracker.update(rows.astype(np.float32), image)).reshape(-1, 8)
        out.append((t, tracks[:, 4].astype(np.int64), tracks[:, :4], tracks[:, 5]))
    return _table(out), time.perf_counter() - start, time.process_time() - cpu


def _table(out: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]) -> TrackTable:
    frames = np.concatenate([np.full(len(ids), t) for t, ids, _, _ in out])
    ids = np.concatenate([ids for _, ids, _, _ in out])
    boxes = np.concatenate([boxes.reshape(-1, 4) for _, _, boxes, _ in out])
    scores = np.concatenate([scores for _, _, _, scores in out])
    return TrackTable.from_columns(frames, ids, boxes, scores)


def crowd_scene(n_objects: int = 100, length: int = 300, seed: int = 0) -> list[np.ndarray]:
    """Detections of `n_objects` boxes walking over a 1920 x 1080 frame for `length` frames (speed scene)."""
    rng = np.random.default_rng(seed)
    position = rng.uniform([0, 0], [1880, 1040], (n_objects, 2))
    velocity, size = rng.normal(0, 2, (n_objects, 2)), rng.uniform(10, 40, (n_objects, 2))
    frames = []
    for _ in range(length):
        position = position + velocity
        boxes = np.concatenate([position, position + size], axis=1) + rng.normal(0, 1, (n_objects, 4))
        frames.append(np.column_stack([boxes, rng.uniform(0.3, 1.0, n_objects), np.zeros(n_objects)]))
    return frames


def paired_speed(name: str, frames: list[np.ndarray], image: np.ndarray, repeats: int) -> dict[str, float]:
    """Median frames per wall-clock and per CPU second of ours and BoxMOT's tracker over `repeats` alternating
    runs, and the ratios."""
    runs = {"ours": [], "boxmot": []}
    for _ in range(repeats):
        runs["ours"].append(run_ours(name, frames)[1:])
        runs["boxmot"].append(run_boxmot(name, frames, image)[1:])
    out = {}
    for key, timings in runs.items():
        out[f"{key}_fps"] = len(frames) / statistics.median(wall for wall, _ in timings)
        out[f"{key}_cpu_fps"] = len(frames) / statistics.median(cpu for _, cpu in timings)
    out["ratio"], out["cpu_ratio"] = out["ours_fps"] / out["boxmot_fps"], out["ours_cpu_fps"] / out["boxmot_cpu_fps"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gt", type=Path, default=DEFAULT_GT, help="a UAVDT <seq>_gt_whole.txt")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--drop", type=float, default=0.1, help="share of true boxes the detector misses")
    parser.add_argument("--jitter", type=float, default=0.05, help="box noise, a fraction of the box size")
    parser.add_argument("--fp", type=float, default=2.0, help="false positives per frame")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per tracker")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    import boxmot  # configures its logger on import: quieten it after

    logging.getLogger(boxmot.__name__).setLevel(logging.WARNING)  # its trackers log their settings when built

    truth = read_uavdt(args.gt)
    ignore_path = args.gt.with_name(args.gt.name.replace("_gt_whole", "_gt_ignore"))
    ignore = read_uavdt(ignore_path) if ignore_path.is_file() else TrackTable.empty()
    length = truth.last_frame
    image = np.zeros((540, 1024, 3), np.uint8)  # BoxMOT's update takes a frame; no pixels exist for UAVDT
    results: dict = {"settings": vars(args) | {"gt": str(args.gt), "json": str(args.json)}, "accuracy": {}, "speed": {}}
    print(f"{args.gt.name}: {length} frames, {len(truth)} boxes, {len(np.unique(truth.ids))} objects; "
          f"seeds {args.seeds}, drop {args.drop}, jitter {args.jitter}, fp/frame {args.fp}")  # fmt: skip
    for row, (library, name, overrides) in VARIANTS.items():
        prepared = {}
        for seed in args.seeds:
            detections = noisy_detections(truth, seed=seed, drop=args.drop, jitter=args.jitter, fp=args.fp)
            frames = per_frame(detections, length)
            run = (run_ours(name, frames, **overrides) if library == "ours"
                   else run_boxmot(name, frames, image, **overrides))  # fmt: skip
            prepared[f"seed{seed}"] = prepare(truth, run[0], "uavdt", ignore=ignore, length=length)
        combined = score_sequences(prepared, protocol="uavdt").combined
        results["accuracy"][row] = {f: combined[f] for f in FIELDS}
    print("\n| tracker | " + " | ".join(FIELDS) + " |\n|---|" + "---|" * len(FIELDS))
    for key, metrics in results["accuracy"].items():
        print(f"| {key} | " + " | ".join(f"{metrics[f]:.2f}" if f in ("HOTA", "AssA", "DetA", "IDF1", "MOTA")
                                          else str(int(metrics[f])) for f in FIELDS) + " |")  # fmt: skip
    scenes = {
        "UAVDT M0101 (~13 boxes/frame)": per_frame(
            noisy_detections(truth, seed=args.seeds[0], drop=args.drop, jitter=args.jitter, fp=args.fp), length
        ),
        "100 boxes/frame, 300 frames": crowd_scene(),
    }
    print("\n| scene | tracker | ours fps (CPU) | BoxMOT fps (CPU) | ours / BoxMOT (CPU) |\n|---|---|---|---|---|")
    for scene, frames in scenes.items():
        for name in SPEED_TRACKERS:
            speed = paired_speed(name, frames, image, args.repeats)
            results["speed"][f"{scene} {name}"] = speed
            print(f"| {scene} | {name} | {speed['ours_fps']:.0f} ({speed['ours_cpu_fps']:.0f}) | "
                  f"{speed['boxmot_fps']:.0f} ({speed['boxmot_cpu_fps']:.0f}) | {speed['ratio']:.1f}x "
                  f"({speed['cpu_ratio']:.1f}x) |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()

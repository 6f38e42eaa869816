"""Our ByteTrack, BoT-SORT and OC-SORT against BoxMOT's on the same detections: HOTA, IDF1, MOTA, IDSW, speed.

    python benchmarks/tracking_vs_boxmot.py       # UAVDT M0101 and synthetic-mot, 5 seeds, 2 noise levels
    python benchmarks/tracking_vs_boxmot.py --gt path/M0101_gt_whole.txt --seeds 0 1 2 --noise 0.2,0.08,5

The detections are made from real drone trajectories without pixels (UAVDT M0101: 407 frames, 5414 boxes): each
true box is dropped with probability DROP (more when UAVDT marks it occluded or out of view), moved and resized
by Gaussian noise of JITTER times its size, and scored from N(0.72, 0.15) (less for the occluded); FP false
positives per frame on average are added, with sizes of true boxes and low scores (--noise DROP,JITTER,FP, one
or more levels). Each seed makes one detection set; every tracker tracks the same sets. The same is done on the
ground truth of the built-in `synthetic-mot` val sequences (VisDrone-MOT protocol). Each row gives the mean over
seeds and the spread [lowest, highest] of MOTA, IDF1 and HOTA. Both libraries run without camera-motion
compensation (there are no pixels) and without appearance features, with our presets' thresholds. Our ByteTrack
preset starts tracks at the high threshold, as BoxMOT's does; one row runs it with the rule of ByteTrack's own
code (0.1 higher), which was our preset until it measured behind BoxMOT, and one with BoxMOT's xyah Kalman
state; the others run our presets (BoxMOT's OC-SORT gets every setting of ours). Scores use the UAVDT
protocol of `tphyolo eval --task track` (class-agnostic, ignore regions of M0101_gt_ignore.txt) and
VisDrone-MOT's for synthetic-mot.

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
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from tphyolo.data.builtin.synthetic_mot import FRAME_SIZE, generate_synthetic_mot
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.data.mot.sequences import read_ground_truth, tracking_split
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.uavdt import read_uavdt
from tphyolo.metrics.track_protocols import prepare
from tphyolo.metrics.tracking import score_sequences
from tphyolo.track.config import TRACKER_PRESETS
from tphyolo.track.ocsort import OCSortConfig
from tphyolo.track.registry import make_tracker
from tphyolo.track.simulated import CONFIDENT_DETECTOR, simulate_detections

SHARED = Path(os.environ.get("TPHYOLO_SHARED", Path(__file__).resolve().parents[2] / "shared"))
DEFAULT_GT = SHARED / "data" / "other" / "uavdt-gt-only" / "M0101_gt_whole.txt"
FIELDS = ("HOTA", "AssA", "DetA", "IDF1", "MOTA", "IDSW", "FP", "FN")
SPREAD = ("MOTA", "IDF1", "HOTA")  # reported as mean [lowest, highest] over seeds
UAVDT_FRAME = (1024, 540)  # width, height of UAVDT's frames
# OC-SORT's published thresholds (det_thresh 0.6, min_hits 3) report few boxes of these detections' scores
OCSORT_FOR_DRONES = {"det_thresh": 0.5, "use_byte": True, "min_hits": 1}
# row -> (library, tracker, overrides: ours, or for BoxMOT's OC-SORT the settings of ours it gets)
VARIANTS = {
    "ours bytetrack (preset)": ("ours", "bytetrack", {}),
    "ours bytetrack, tracks started 0.1 above the high threshold (ByteTrack's code)": (
        "ours", "bytetrack", {"new_track_thresh": 0.6}
    ),
    "ours bytetrack, BoxMOT's xyah Kalman state": ("ours", "bytetrack", {"motion": "xyah"}),
    "BoxMOT bytetrack": ("boxmot", "bytetrack", {}),
    "ours botsort": ("ours", "botsort", {}),
    "BoxMOT botsort": ("boxmot", "botsort", {}),
    "ours ocsort": ("ours", "ocsort", {}),
    "BoxMOT ocsort": ("boxmot", "ocsort", {}),
    "ours ocsort, BYTE, det_thresh 0.5, min_hits 1": ("ours", "ocsort", OCSORT_FOR_DRONES),
    "BoxMOT ocsort, BYTE, det_thresh 0.5, min_hits 1": ("boxmot", "ocsort", OCSORT_FOR_DRONES),
}
SPEED_TRACKERS = ("bytetrack", "botsort", "ocsort")


def noisy_detections(truth: TrackTable, *, seed: int, drop: float, jitter: float, fp: float,
                     frame: tuple[int, int] = UAVDT_FRAME) -> TrackTable:  # fmt: skip
    """Detections simulated from `truth` by `tphyolo.track.simulated`'s confident detector with these misses,
    box noise and false positives per frame (see the module docstring)."""
    noise = replace(CONFIDENT_DETECTOR, miss=drop, jitter=jitter, false_positives=fp)
    return simulate_detections(truth, noise, seed=seed, frame=frame)


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
        out.append((t, tracks.ids, tracks.boxes, tracks.scores, tracks.labels))
    return track_table(out), time.perf_counter() - start, time.process_time() - cpu


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
        out.append((t, tracks[:, 4].astype(np.int64), tracks[:, :4], tracks[:, 5], tracks[:, 6].astype(np.int64)))
    return track_table(out), time.perf_counter() - start, time.process_time() - cpu


def track_table(out: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> TrackTable:
    """Tracker output rows (frame, ids, boxes, scores, class ids) as a table whose categories are class id + 1
    (`per_frame` numbered the classes category - 1): VisDrone-MOT scores output by category."""
    frames = np.concatenate([np.full(len(row[1]), row[0]) for row in out])
    ids, boxes, scores, classes = (np.concatenate([row[i] for row in out]) for i in (1, 2, 3, 4))
    return TrackTable.from_columns(frames, ids, boxes.reshape(-1, 4), scores, classes + 1)


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


def accuracy_scenes(gt: Path, synthetic_sequences: int, synthetic_length: int, folder: Path) -> dict[str, tuple]:
    """Scene -> (protocol, frame size, [(name, truth, objects, ignore, length)]): UAVDT `gt` and synthetic-mot
    val; `objects` are the truth's boxes that detections are simulated from (not ignored regions or others)."""
    truth = read_uavdt(gt)
    ignore_path = gt.with_name(gt.name.replace("_gt_whole", "_gt_ignore"))
    ignore = read_uavdt(ignore_path) if ignore_path.is_file() else TrackTable.empty()
    scenes = {f"UAVDT {gt.name.split('_')[0]}": ("uavdt", UAVDT_FRAME, [(gt.name, truth, truth, ignore,
                                                                          truth.last_frame)])}  # fmt: skip
    if synthetic_sequences:
        data = generate_synthetic_mot(folder, n_train=0, n_val=synthetic_sequences, length=synthetic_length, seed=0)
        split = tracking_split(load_data_config(data), "val")
        sequences = []
        for sequence in read_ground_truth(split.annotations, split.fmt):
            truth = sequence.truth
            objects = truth.select((truth.classes >= 1) & (truth.classes <= len(VISDRONE_NAMES)) & (truth.scores > 0))
            sequences.append((sequence.name, truth, objects, sequence.ignore, sequence.length or truth.last_frame))
        scenes[f"synthetic-mot val ({synthetic_sequences} x {synthetic_length} frames)"] = (
            split.fmt, FRAME_SIZE, sequences
        )
    return scenes


def score_row(library, name, overrides, protocol, frame, sequences, seeds, noise, image) -> dict:
    """The metrics of one tracker on one scene: per seed, and over all seeds together (`FIELDS`)."""
    drop, jitter, fp = noise
    per_seed, together = [], {}
    for seed in seeds:
        prepared = {}
        for index, (seq, truth, objects, ignore, length) in enumerate(sequences):
            detections = noisy_detections(objects, seed=seed * 1000 + index, drop=drop, jitter=jitter, fp=fp,
                                          frame=frame)  # fmt: skip
            frames = per_frame(detections, length)
            run = (run_ours(name, frames, **overrides) if library == "ours"
                   else run_boxmot(name, frames, image, **overrides))  # fmt: skip
            prepared[f"{seq}-seed{seed}"] = prepare(truth, run[0], protocol, ignore=ignore, length=length)
        per_seed.append(score_sequences(prepared, protocol=protocol).combined)
        together.update(prepared)
    combined = score_sequences(together, protocol=protocol).combined
    row = {f: combined[f] for f in FIELDS}
    for field in SPREAD:
        values = [metrics[field] for metrics in per_seed]
        row[f"{field}_seeds"] = values
    return row


def accuracy_table(rows: dict[str, dict]) -> str:
    """Markdown: mean [lowest, highest] over seeds of `SPREAD`, and IDSW, FP, FN summed over seeds."""
    head = "| tracker | " + " | ".join(f"{f} mean [min, max]" for f in SPREAD) + " | IDSW | FP | FN |"
    lines = [head, "|---|" + "---|" * (len(SPREAD) + 3)]
    for key, row in rows.items():
        spreads = []
        for field in SPREAD:
            values = row[f"{field}_seeds"]
            spreads.append(f"{statistics.mean(values):.2f} [{min(values):.2f}, {max(values):.2f}]")
        lines.append(f"| {key} | " + " | ".join(spreads) + f" | {int(row['IDSW'])} | {int(row['FP'])} | "
                     f"{int(row['FN'])} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gt", type=Path, default=DEFAULT_GT, help="a UAVDT <seq>_gt_whole.txt")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--noise", nargs="+", default=["0.1,0.05,2", "0.2,0.08,5"], metavar="DROP,JITTER,FP",
                        help="noise levels: share of true boxes missed, box noise (fraction of the size), false "
                        "positives per frame")  # fmt: skip
    parser.add_argument("--synthetic-sequences", type=int, default=3, help="synthetic-mot val sequences (0: none)")
    parser.add_argument("--synthetic-length", type=int, default=60, help="frames per synthetic-mot sequence")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per tracker (0: no speed table)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    import boxmot  # configures its logger on import: quieten it after

    logging.getLogger(boxmot.__name__).setLevel(logging.WARNING)  # its trackers log their settings when built

    noises = [tuple(float(v) for v in text.split(",")) for text in args.noise]
    image = np.zeros((540, 1024, 3), np.uint8)  # BoxMOT's update takes a frame; no pixels are used
    results: dict = {"settings": vars(args) | {"gt": str(args.gt), "json": str(args.json)}, "accuracy": {}, "speed": {}}
    with tempfile.TemporaryDirectory(prefix="tphyolo-synthetic-mot-") as folder:
        scenes = accuracy_scenes(args.gt, args.synthetic_sequences, args.synthetic_length, Path(folder))
        for scene, (protocol, frame, sequences) in scenes.items():
            for noise in noises:
                title = f"{scene}, drop {noise[0]}, jitter {noise[1]}, fp/frame {noise[2]}, seeds {args.seeds}"
                rows = {row: score_row(library, name, overrides, protocol, frame, sequences, args.seeds, noise, image)
                        for row, (library, name, overrides) in VARIANTS.items()}  # fmt: skip
                results["accuracy"][title] = rows
                print(f"\n{title}\n\n{accuracy_table(rows)}")
    if args.repeats < 1:
        if args.json:
            args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
        return
    truth = read_uavdt(args.gt)
    length = truth.last_frame
    drop, jitter, fp = noises[0]
    scenes = {
        "UAVDT M0101 (~13 boxes/frame)": per_frame(
            noisy_detections(truth, seed=args.seeds[0], drop=drop, jitter=jitter, fp=fp), length
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

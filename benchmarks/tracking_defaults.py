"""The trackers' defaults for drone video: a sweep of each tracker's thresholds on drone tracking data, against
the settings published for MOT17 (the `-mot17` presets).

    python benchmarks/tracking_defaults.py                        # UAVDT M0101 and synthetic-mot, drone detector
    python benchmarks/tracking_defaults.py --seeds 0 1 2 --detectors drone confident \\
        --weights runs/train/exp/weights/best.pt --img 320         # adds a real detector's output on synthetic-mot

Scenes: the real drone trajectories of UAVDT M0101 (407 frames, ground truth without pixels) and the val
sequences of the built-in `synthetic-mot`, each with detections simulated by `tphyolo.track.simulated`'s
detectors (`--detectors`: `drone`, fitted to a real detector's scores, misses and false positives on
synthetic-mot; `confident`, a clean detector), one detection set per seed; and, with `--weights`, that
detector's own output on the synthetic-mot val frames (at `tphyolo track`'s detector threshold, run once and
kept in `--detector-cache`). Every candidate tracks the same detections without camera-motion compensation
(there are no pixels) and is scored with the protocol of its scene (UAVDT: class-agnostic, with M0101's ignore
regions; synthetic-mot: VisDrone-MOT). A candidate's rank is the mean over scenes of (HOTA + IDF1 + MOTA) / 3;
the table gives each scene's HOTA / IDF1 / MOTA (means over seeds) and marks the presets of the registry.

With `--counts`, what the defaults change in analytics: each tracker's default and its MOT17 preset track the
synthetic-mot val detections of the first seed (and the detector's, with `--weights`) inside `tphyolo analyze`
(a grid of ten lines over the frame, sparse camera-motion estimate from the frames), and the line crossings are scored
against those of the ground-truth tracks with the same lines (`tphyolo eval --task count`: the sum over line,
direction and class of |found - true| over the true total).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import fields
from pathlib import Path

import numpy as np
from tracking_vs_boxmot import DEFAULT_GT, UAVDT_FRAME, accuracy_scenes, per_frame, track_table

from tphyolo.analyze.pipeline import analyze
from tphyolo.analyze.scoring import read_counts, score_counts, true_counts
from tphyolo.data.builtin.synthetic_mot import FRAME_SIZE
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.visdrone_mot import write_visdrone_mot
from tphyolo.metrics.track_protocols import prepare
from tphyolo.metrics.tracking import score_sequences
from tphyolo.track.job import TRACK_CONF
from tphyolo.track.registry import TRACKERS, make_tracker
from tphyolo.track.simulated import DETECTORS, simulate_detections

METRICS = ("HOTA", "IDF1", "MOTA")
THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.6)
# tracker -> candidate settings, each over the tracker's MOT17 preset
GRIDS = {
    "bytetrack": [{"motion": "xywh", "track_high_thresh": h, "new_track_thresh": h, "track_buffer": b}
                  for h in THRESHOLDS for b in (30, 60)],
    "botsort": [{"track_high_thresh": h, "new_track_thresh": round(h + d, 2)} for h in THRESHOLDS for d in (0.0, 0.1)],
    "ocsort": [{"det_thresh": d, "min_hits": m, "use_byte": b}
               for d in THRESHOLDS for m in (1, 3) for b in (False, True)],
}  # fmt: skip


def scenes(args: argparse.Namespace, folder: Path) -> dict[str, tuple[str, list, dict[int, list]]]:
    """Scene -> (protocol, [(name, truth, ignore, length)], seed -> per-sequence frames of detections)."""
    built = accuracy_scenes(args.gt, args.synthetic_sequences, args.synthetic_length, folder)
    out = {}
    for (title, (protocol, frame, sequences)), detector in ((s, d) for s in built.items() for d in args.detectors):
        noise = DETECTORS[detector]
        per_seed = {seed: [per_frame(simulate_detections(objects, noise, seed=seed * 1000 + i, frame=frame), length)
                           for i, (_, _, objects, _, length) in enumerate(sequences)]
                    for seed in args.seeds}  # fmt: skip
        out[f"{title}, {detector} detector"] = (protocol, [(s[0], s[1], s[3], s[4]) for s in sequences], per_seed)
    if args.weights is not None and args.synthetic_sequences:
        protocol, _, sequences = built[next(t for t in built if t.startswith("synthetic-mot"))]
        detected = real_detections(args, folder, [(s[0], s[4]) for s in sequences])
        out[f"synthetic-mot val, {Path(args.weights).name} at {args.img} px"] = (
            protocol, [(s[0], s[1], s[3], s[4]) for s in sequences], {0: detected}
        )
    return out


def real_detections(args: argparse.Namespace, folder: Path, sequences: list[tuple[str, int]]) -> list[list]:
    """Per sequence, per frame (N, 6) rows x1, y1, x2, y2, score, category - 1 of the detector `args.weights` on
    the synthetic-mot val frames under `folder`, read from `args.detector_cache` when it holds them."""
    cache = args.detector_cache
    if cache is None or not cache.is_file():
        from tphyolo.predict.predictor import Predictor

        predictor = Predictor(args.weights, conf=TRACK_CONF, imgsz=args.img)
        category = np.array([VISDRONE_NAMES.index(name) + 1 for name in predictor.names])
        rows = {}
        for name, length in sequences:
            files = sorted((folder / "val" / "sequences" / name).glob("*.jpg"))[:length]
            results = predictor([str(f) for f in files])
            rows[name] = np.concatenate([
                np.column_stack([np.full(len(r.scores), t), r.boxes.numpy(), r.scores.numpy(),
                                 category[r.labels.numpy()]]) for t, r in enumerate(results, start=1)
            ])  # fmt: skip
        if cache is not None:
            np.savez(cache, **rows)
    else:
        rows = dict(np.load(cache))
    out = []
    for name, length in sequences:
        table = rows[name][rows[name][:, 5] >= TRACK_CONF]
        detections = TrackTable.from_columns(table[:, 0].astype(np.int64), None, table[:, 1:5], table[:, 5],
                                             table[:, 6].astype(np.int64))  # fmt: skip
        out.append(per_frame(detections, length))
    return out


def score(tracker: str, settings: dict, protocol: str, sequences: list, per_seed: dict[int, list]) -> dict:
    """Mean over seeds of `METRICS` of `tracker` with `settings` over its MOT17 preset on one scene."""
    per_metric = {m: [] for m in METRICS}
    for seed, frames_of in per_seed.items():
        prepared = {}
        for (name, truth, ignore, length), frames in zip(sequences, frames_of, strict=True):
            model = make_tracker(f"{tracker}-mot17", **settings, **({"cmc": "none"} if tracker != "ocsort" else {}))
            out = []
            for t, rows in enumerate(frames, start=1):
                tracks = model.update(rows[:, :4], rows[:, 4], rows[:, 5])
                out.append((t, tracks.ids, tracks.boxes, tracks.scores, tracks.labels))
            prepared[f"{name}-{seed}"] = prepare(truth, track_table(out), protocol, ignore=ignore, length=length)
        combined = score_sequences(prepared, protocol=protocol).combined
        for metric in METRICS:
            per_metric[metric].append(combined[metric])
    return {m: statistics.mean(v) for m, v in per_metric.items()}


# a grid of lines over synthetic-mot's first frame (640 x 384): 5 across the frame's width, 5 down its height
COUNT_LINES = "lines:\n" \
    + "".join(f"  - name: x{x}\n    points: [[{x}, 8], [{x}, 376]]\n" for x in range(80, 640, 120)) \
    + "".join(f"  - name: y{y}\n    points: [[8, {y}], [632, {y}]]\n" for y in range(64, 384, 64))  # fmt: skip


def count_errors(folder: Path, scene: tuple, trackers: list[str]) -> dict[str, tuple[int, int, float]]:
    """Tracker (default and `-mot17` preset) -> (sum of |found - true| line counts, true total, error rate) on
    the synthetic-mot val sequences under `folder` with `scene`'s first detection set."""
    _, sequences, per_seed = scene
    regions = folder / "count_lines.yaml"
    regions.write_text(COUNT_LINES, encoding="utf-8")
    detections, truth_dir = folder / "count_detections", folder / "count_truth"
    for (name, truth, _, _), frames in zip(sequences, next(iter(per_seed.values())), strict=True):
        rows = [(t, r) for t, r in enumerate(frames, start=1) if len(r)]
        write_visdrone_mot(detections / f"{name}.txt", TrackTable.from_columns(
            np.concatenate([np.full(len(r), t) for t, r in rows]), None, np.concatenate([r[:, :4] for _, r in rows]),
            np.concatenate([r[:, 4] for _, r in rows]), np.concatenate([r[:, 5] for _, r in rows]).astype(int) + 1,
        ))  # fmt: skip
        write_visdrone_mot(truth_dir / f"{name}.txt", truth.select(truth.ids > 0))
    source = folder / "val" / "sequences"
    true = true_counts(truth_dir, regions, source=source)
    out = {}
    for tracker in trackers:
        for name in (tracker, f"{tracker}-mot17"):
            run = folder / f"count-{name}"
            model = make_tracker(name, **({"cmc": "sparse"} if tracker != "ocsort" else {}))
            analyze(regions, run, source=source, detections=detections, tracker=model, save_video=False,
                    progress=False)  # fmt: skip
            score = score_counts(true, read_counts(run))
            out[name] = (score.error, score.true_total, score.error / max(score.true_total, 1))
    return out


def differences(settings: object, base: object) -> dict:
    """The fields of `settings` that differ from `base` (both a tracker's settings)."""
    return {f.name: getattr(settings, f.name) for f in fields(settings) if getattr(settings, f.name) !=
            getattr(base, f.name) and f.name not in ("tracker", "cmc")}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gt", type=Path, default=DEFAULT_GT, help="a UAVDT <seq>_gt_whole.txt")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--detectors", nargs="+", default=["drone"], choices=sorted(DETECTORS))
    parser.add_argument("--trackers", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    parser.add_argument("--synthetic-sequences", type=int, default=2, help="synthetic-mot val sequences (0: none)")
    parser.add_argument("--synthetic-length", type=int, default=60, help="frames per synthetic-mot sequence")
    parser.add_argument("--weights", help="a detector to run on the synthetic-mot val frames (a scene of its own)")
    parser.add_argument("--img", type=int, default=320, help="the detector's image size")
    parser.add_argument("--detector-cache", type=Path, help="keep the detector's output here (.npz) and reuse it")
    parser.add_argument("--counts", action="store_true", help="also score analytics line counts (synthetic-mot)")
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tphyolo-tracking-defaults-") as folder:
        built = scenes(args, Path(folder))
        if args.counts:
            print("\n| detections | tracker | line count error (sum of abs differences / true total) |\n|---|---|---|")
            for title, scene in built.items():
                if title.startswith("synthetic-mot") and "confident" not in title:
                    for name, (error, total, rate) in count_errors(Path(folder), scene, args.trackers).items():
                        print(f"| {title} | {name} | {error} / {total} = {rate:.2f} |")
    print(f"scenes: {list(built)}; seeds {args.seeds}; UAVDT frame {UAVDT_FRAME}, synthetic-mot frame {FRAME_SIZE}")
    head = " | ".join(f"{scene} HOTA / IDF1 / MOTA" for scene in built)
    for tracker in args.trackers:
        base = TRACKERS[f"{tracker}-mot17"].preset
        candidates = {"MOT17 preset": {}} | {", ".join(f"{k} {v}" for k, v in g.items()): g for g in GRIDS[tracker]}
        default = differences(TRACKERS[tracker].preset, base)
        rows = []
        for label, settings in candidates.items():
            per_scene = [score(tracker, settings, protocol, seqs, seeds) for protocol, seqs, seeds in built.values()]
            rank = statistics.mean(statistics.mean(s[m] for m in METRICS) for s in per_scene)
            mark = " (default)" if differences(make_tracker(f"{tracker}-mot17", **settings).config, base) == default \
                else ""  # fmt: skip
            rows.append((rank, f"{label}{mark}", per_scene))
        print(f"\n{tracker} (over {tracker}-mot17; default = {default})\n\n| settings | mean | {head} |\n"
              f"|---|---|{'---|' * len(built)}")  # fmt: skip
        for rank, label, per_scene in sorted(rows, key=lambda row: -row[0]):
            cells = " | ".join(" / ".join(f"{s[m]:.1f}" for m in METRICS) for s in per_scene)
            print(f"| {label} | {rank:.1f} | {cells} |")
    print(f"\n{time.perf_counter() - start:.0f} s; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

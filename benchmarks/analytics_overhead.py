"""What the analytics (`tphyolo.analyze`) cost on top of tracking, and how fast `tphyolo analyze` reads a
tracking run's files.

    python benchmarks/analytics_overhead.py                       # 3 synthetic-mot sequences of 90 frames
    python benchmarks/analytics_overhead.py --sequences 4 --length 120 --repeats 5

1. Overhead per frame, same run: synthetic-mot sequences (a panning, zooming, turning camera) are tracked from
   their true boxes with noise (N(0, 1) px) and a miss in ten, by BoT-SORT with sparse camera-motion
   compensation from the frames (the tracker's own time includes its motion estimate), and after each
   `ByteTracker.update` the four analytics (`Analysis.update`: Counter on 2 lines, Zones on 1 zone, Speed, Heatmap)
   read its tracks. Both are timed around their own call in the same loop, in CPU seconds of this process
   (`time.process_time`: OpenCV's threads included, and less disturbed by other processes than the wall clock);
   the baseline is the tracker's time, labelled "tracker (BoT-SORT + sparse CMC)". A second baseline, the
   tracker without compensation (ByteTrack, cmc none), shows the overhead against the cheapest tracker. Medians
   over --repeats passes.
2. `--tracks` input: the whole `tphyolo.analyze.analyze` call on the tracks of step 1 written as VisDrone-MOT
   files, without frames (no decoding, no video): frames per second of the pipeline, files written included.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from tphyolo.analyze.config import AnalyzeConfig
from tphyolo.analyze.inputs.streams import StreamFrame
from tphyolo.analyze.pipeline import Analysis, analyze
from tphyolo.analyze.regions import load_regions
from tphyolo.data.builtin.synthetic_mot import WORLD_GSD, simulate_sequence
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.visdrone_mot import write_visdrone_mot
from tphyolo.track.tracker import ByteTracker

REGIONS = {
    "lines": [{"name": "h", "points": [[0, 192], [640, 192]]}, {"name": "v", "points": [[320, 0], [320, 384]]}],
    "zones": [{"name": "centre", "points": [[220, 120], [420, 120], [420, 264], [220, 264]]}],
}


def detections(truth: TrackTable, rng: np.random.Generator) -> TrackTable:
    objects = truth.select((truth.ids > 0) & (truth.classes <= 10))
    objects = objects.select(rng.random(len(objects)) > 0.1)
    boxes = objects.boxes + rng.normal(0, 1.0, objects.boxes.shape)
    return TrackTable.from_columns(objects.frames, np.full(len(objects), -1), boxes, np.full(len(objects), 0.8),
                                   objects.classes)  # fmt: skip


def one_pass(sequences, tracker: ByteTracker, regions, *, analytics: bool = True):
    """(tracker seconds, analytics seconds, frames, tracks table per sequence) of one pass over `sequences`."""
    tracking = analysing = 0.0
    frames, outputs = 0, []
    for sequence, found in sequences:
        tracker.reset()
        analysis = Analysis(regions, names=NAMES, fps=25.0, config=AnalyzeConfig(), frame_size=(640, 384),
                            measure_speed=True)  # fmt: skip
        by_frame, rows = dict(found.by_frame()), []
        for t, image in enumerate(sequence.frames):
            now = by_frame.get(t + 1, TrackTable.empty())
            start = time.process_time()
            tracks = tracker.update(now.boxes, now.scores, now.classes, frame=image)
            middle = time.process_time()
            if analytics:
                frame = StreamFrame(t + 1, image, 25.0, tracks.boxes, tracks.ids, tracks.labels - 1,
                                    tracker.camera_motion)  # fmt: skip
                analysis.update(frame, gsd=WORLD_GSD)
            end = time.process_time()
            tracking, analysing, frames = tracking + middle - start, analysing + end - middle, frames + 1
            rows.append(TrackTable.from_columns(np.full(len(tracks), t + 1), tracks.ids, tracks.boxes, tracks.scores,
                                                tracks.labels))  # fmt: skip
        outputs.append(TrackTable.concatenate(rows))
    return tracking, analysing, frames, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sequences", type=int, default=3)
    parser.add_argument("--length", type=int, default=90)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    sequences = []
    for i in range(args.sequences):
        sequence = simulate_sequence(np.random.default_rng([11, i]), args.length)
        sequences.append((sequence, detections(sequence.truth, rng)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "regions.yaml"
        path.write_text(yaml.safe_dump(REGIONS))
        regions = load_regions(path, frame_size=(640, 384))
        print(f"{args.sequences} synthetic-mot sequences x {args.length} frames, {args.repeats} passes (median)")
        for label, tracker in (("tracker (BoT-SORT + sparse CMC)", ByteTracker("botsort")),
                               ("tracker (ByteTrack, no CMC)", ByteTracker("bytetrack"))):  # fmt: skip
            passes = [one_pass(sequences, tracker, regions) for _ in range(args.repeats)]
            tracking = statistics.median(p[0] for p in passes)
            analysing = statistics.median(p[1] for p in passes)
            frames = passes[0][2]
            print(f"  baseline {label}: {1000 * tracking / frames:.3f} ms/frame;")
            print(f"    analytics on top: {1000 * analysing / frames:.3f} ms/frame = "
                  f"{100 * analysing / tracking:.1f} % of the baseline")  # fmt: skip
        outputs = passes[0][3]
        folder = Path(tmp) / "tracks"
        for i, table in enumerate(outputs):
            write_visdrone_mot(folder / f"seq{i}.txt", table)
        runs = []
        for r in range(args.repeats):
            start = time.perf_counter()
            reports = analyze(path, Path(tmp) / f"run{r}", tracks=folder, config=AnalyzeConfig(fps=25.0, gsd=WORLD_GSD),
                              save_video=False, progress=False)  # fmt: skip
            runs.append(time.perf_counter() - start)
        frames = sum(report.frames for report in reports)
        print(f"  analyze --tracks (files in and out, no frames): {frames / statistics.median(runs):.0f} frames/s "
              f"({frames} frames)")  # fmt: skip


if __name__ == "__main__":
    main()

"""End to end: tracking a video against predicting on it, with the same detector, frames per second.

    python benchmarks/track_vs_predict.py                        # an untrained tph-yolov5n, a synthetic-mot video
    python benchmarks/track_vs_predict.py --weights best.pt --video clip.mp4 --img 640 --repeats 5

Predicting is `Predictor.stream` over the video (decode, detect); tracking is `Predictor.track` over it (the
same, plus the tracker: ByteTrack, and BoT-SORT with its camera-motion compensation). Each mode runs the whole
video in turn, alternating, --repeats times after a warm-up; the median frames per second of each is reported
with the ratio to predicting (the baseline). Without --weights the detector is a tph-yolov5n with random
weights (its boxes are noise, but it costs what the trained model costs) at --conf 0.1; without --video one
synthetic-mot sequence (640 x 384) is written as an mp4. Run it where nothing else loads the CPU, or read the
ratio only.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from tphyolo.data.builtin.synthetic_mot import render_sequence
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor
from tphyolo.track.tracker import ByteTracker


def synthetic_video(path: Path, length: int) -> Path:
    frames, _, _ = render_sequence(np.random.default_rng([11, 0]), length)
    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 30, (width, height))
    for frame in frames:
        writer.write(frame)
    writer.release()
    return path


def timed(run) -> tuple[float, int]:
    """(seconds, frames) of consuming the iterator `run()`."""
    start, frames = time.perf_counter(), 0
    for _ in run():
        frames += 1
    return time.perf_counter() - start, frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", help="a checkpoint (default: an untrained tph-yolov5n)")
    parser.add_argument("--video", type=Path, help="default: a synthetic-mot sequence")
    parser.add_argument("--frames", type=int, default=60, help="frames of the synthetic video")
    parser.add_argument("--img", type=int, default=640)
    parser.add_argument("--conf", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        video = args.video or synthetic_video(Path(tmp) / "clip.mp4", args.frames)
        if args.weights:
            weights = args.weights
        else:
            torch.manual_seed(0)
            weights = build_model("tph-yolov5n", names=list(NAMES)).eval()
        predictor = Predictor(weights, imgsz=args.img, conf=args.conf, device="cpu")
        modes = {
            "predict (baseline)": lambda: predictor.stream(video),
            "track, bytetrack": lambda: predictor.track(video, ByteTracker("bytetrack")),
            "track, botsort + sparse CMC": lambda: predictor.track(video, ByteTracker("botsort")),
        }
        for run in modes.values():  # warm-up
            for _ in itertools.islice(run(), 3):
                pass
        seconds: dict[str, list[float]] = {name: [] for name in modes}
        count = 0
        for _ in range(args.repeats):
            for name, run in modes.items():
                elapsed, count = timed(run)
                seconds[name].append(elapsed)
        detections = sum(len(r) for _, r in predictor.stream(video)) / count
        print(f"{video.name}: {count} frames, {detections:.1f} detections per frame, img {args.img}, conf {args.conf}, "
              f"{'untrained tph-yolov5n' if not args.weights else args.weights}, median of {args.repeats} runs\n")
        print("| mode | fps | / predict |\n|---|---|---|")
        base = count / statistics.median(seconds["predict (baseline)"])
        for name, times in seconds.items():
            fps = count / statistics.median(times)
            print(f"| {name} | {fps:.2f} | {fps / base:.3f}x |")


if __name__ == "__main__":
    main()

"""Detections simulated from true trajectories, as a detector would give them: for measuring trackers on drone
data that comes without pixels (UAVDT ground truth) or without a detector trained for it.

    detections = simulate_detections(truth, DRONE_DETECTOR, seed=0, frame=(1024, 540))

Each true box is missed with probability `miss` (`hard_miss` times more when the truth marks it occluded or
out of view), its corners moved by Gaussian noise of `jitter` times its width and height, and scored: from
N(`score_mean`, `score_spread`) (`scores="normal"`) or from a Beta law of that mean and spread
(`scores="beta"`, skewed as a detector's scores of small objects are), `hard_score` lower for the occluded.
`false_positives` boxes per frame on average are added, with the sizes of true boxes: a share `fp_near` of
them next to a true box of their frame (a box's width or height away, at most: the misplaced and split boxes a
detector makes around objects), the rest anywhere in the frame; they score uniformly in `fp_range`
(`fp_scores="uniform"`) or `fp_range[0]` plus an exponential law of mean `fp_mean` (`fp_scores="exponential"`).
Scores are clipped to [0.01, 1] and boxes under `conf` dropped, as a detector's threshold does. The output
depends only on the truth, the noise and the seed.

Two detectors are named: `CONFIDENT_DETECTOR`, confident and clean (most true boxes score 0.6-0.9, two false
positives a frame), and `DRONE_DETECTOR`, fitted to a real one: tph-yolov5n trained by the README's main job
(320 px, 20 epochs) on the three val sequences of `synthetic-mot` at conf 0.05 found 87-93 % of the true boxes
(IoU 0.5) and scored them with a mean of 0.28-0.35 and a spread of 0.20-0.22 (median 0.22-0.31, 90th
percentile 0.61-0.66), beside 46-61 false positives a frame averaging 0.13-0.17 (3-6 a frame above 0.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tphyolo.data.mot.table import TrackTable
from tphyolo.errors import InputError
from tphyolo.flags import FRACTION, check_field_types, checked

SCORE_LAWS = ("normal", "beta")
FP_SCORE_LAWS = ("uniform", "exponential")


@dataclass(frozen=True)
class DetectorNoise:
    """How simulated detections differ from the truth (see the module docstring)."""

    miss: float = checked(0.1, bounds=FRACTION)
    hard_miss: float = 2.5
    jitter: float = 0.05
    scores: str = checked("normal", choices=SCORE_LAWS)
    score_mean: float = checked(0.72, bounds=FRACTION)
    score_spread: float = 0.15
    hard_score: float = 0.15
    false_positives: float = 2.0
    fp_near: float = checked(0.0, bounds=FRACTION)
    fp_scores: str = checked("uniform", choices=FP_SCORE_LAWS)
    fp_range: tuple[float, float] = (0.1, 0.65)
    fp_mean: float = 0.1
    conf: float = checked(0.0, bounds=FRACTION)

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds
        if self.scores == "beta" and not 0 < self.score_spread**2 < self.score_mean * (1 - self.score_mean):
            raise InputError(f"no Beta law has mean {self.score_mean} and spread {self.score_spread}")


CONFIDENT_DETECTOR = DetectorNoise()
DRONE_DETECTOR = DetectorNoise(
    miss=0.1, jitter=0.06, scores="beta", score_mean=0.32, score_spread=0.21, false_positives=50.0, fp_near=0.5,
    fp_scores="exponential", fp_range=(0.05, 1.0), fp_mean=0.1, conf=0.1,
)  # fmt: skip
DETECTORS = {"confident": CONFIDENT_DETECTOR, "drone": DRONE_DETECTOR}


def simulate_detections(truth: TrackTable, noise: DetectorNoise, *, seed: int, frame: tuple[int, int]) -> TrackTable:
    """Detections (id -1, score, category = the truth's; false positives category 1) made from `truth` by
    `noise` (see the module docstring), false positives inside a `frame` of (width, height) pixels."""
    rng = np.random.default_rng(seed)
    hard = (truth.occlusion >= 2) | (truth.truncation >= 2)  # occluded or partly out of view
    keep = rng.random(len(truth)) > np.where(hard, noise.hard_miss * noise.miss, noise.miss)
    truth = truth.select(keep)
    size = truth.boxes[:, 2:] - truth.boxes[:, :2]
    boxes = truth.boxes + rng.normal(0, noise.jitter, truth.boxes.shape) * np.tile(size, 2)
    boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2] + 2)
    scores = _true_scores(rng, noise, len(truth)) - np.where(hard[keep], noise.hard_score, 0.0)
    last = truth.last_frame
    n_fp = rng.poisson(noise.false_positives * last)
    fp_frames = rng.integers(1, last + 1, n_fp)
    fp_size = size[rng.integers(0, len(truth), n_fp)]
    fp_corner = rng.uniform(0, 1, (n_fp, 2)) * (np.array(frame) - fp_size)
    fp_scores = _fp_scores(rng, noise, n_fp)
    if noise.fp_near > 0 and len(truth):
        near = rng.random(n_fp) < noise.fp_near
        anchor = rng.integers(0, len(truth), int(near.sum()))
        shift = rng.uniform(-1, 1, (len(anchor), 2)) * size[anchor]
        fp_frames[near], fp_size[near] = truth.frames[anchor], size[anchor]
        fp_corner[near] = truth.boxes[anchor, :2] + shift
    fp_boxes = np.concatenate([fp_corner, fp_corner + fp_size], axis=1)
    out = TrackTable.from_columns(
        np.concatenate([truth.frames, fp_frames]), None, np.concatenate([boxes, fp_boxes]),
        np.clip(np.concatenate([scores, fp_scores]), 0.01, 1.0), np.concatenate([truth.classes, np.ones(n_fp)]),
    )  # fmt: skip
    return out.select(out.scores >= noise.conf) if noise.conf > 0 else out


def _true_scores(rng: np.random.Generator, noise: DetectorNoise, n: int) -> np.ndarray:
    if noise.scores == "normal":
        return rng.normal(noise.score_mean, noise.score_spread, n)
    mean, spread = noise.score_mean, noise.score_spread
    concentration = mean * (1 - mean) / spread**2 - 1  # a + b of the Beta law of this mean and variance
    return rng.beta(mean * concentration, (1 - mean) * concentration, n)


def _fp_scores(rng: np.random.Generator, noise: DetectorNoise, n: int) -> np.ndarray:
    low, high = noise.fp_range
    if noise.fp_scores == "uniform":
        return rng.uniform(low, high, n)
    return np.minimum(low + rng.exponential(noise.fp_mean, n), high)

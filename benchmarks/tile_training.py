"""Training on native-resolution tiles against the two whole-image recipes, at equal training time.

    python benchmarks/tile_training.py --data synthetic-large --minutes 4 --model tph-yolov5n

Three runs of `tphyolo train` on the same data, each stopped once it has trained `--minutes` (the last epoch cut
at that time; --noval, so validation costs none of it), its EMA weights then scored on the full val images by the
VisDrone protocol, each as its own user infers with it. The time is the training process's CPU time by default
(`--clock cpu`, with the loader in the process: `--workers 0`; on a quiet machine
with T threads, T minutes of it pass in one minute of the clock), so that a run beside other work trains as many
steps as on a quiet machine and the three runs get the same share whatever else runs; `--clock wall` counts
seconds of the clock instead. `--weights` starts all three from the same checkpoint (as the paper starts from
YOLOv5's COCO weights):

- (a) whole images resized to 640 (`--img 640`), scored on whole images at 640;
- (b) whole images at 1536 with batch 2, the paper's recipe (`--img 1536 --batch 2`), scored at 1536;
- (c) tiles of 640 at the images' own resolution (`--tile --img 640`) with (a)'s batch (a 640 px tile costs what a
  640 px image costs), scored sliced at 640, as the checkpoint's default slicing does.

Columns: mAP50 of every object; AP50 of the objects under 16 and under 32 px (the square root of the box's area;
larger objects become ignore regions and detections larger than twice the bound are left out); peak memory of one
training step (forward, loss, backward, SGD step) at the run's batch and input size: on the CPU, the allocator's
peak from the profiler (`tphyolo.bench.timing.peak_memory_mb`), on a GPU `torch.cuda.max_memory_allocated`.
The table ends with the CPU it ran on (`lscpu`). `--recipes a c` runs some of them (the real VisDrone images).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from dataclasses import replace
from pathlib import Path

import torch

from tphyolo.bench.model import synthetic_targets, train_step
from tphyolo.bench.timing import peak_memory_mb
from tphyolo.evaluation.scoring import MetricsEvaluator
from tphyolo.evaluation.settings import ValConfig
from tphyolo.evaluation.val import val
from tphyolo.infer.config import VALIDATION
from tphyolo.infer.slicing import SliceConfig
from tphyolo.models import build_model
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.cpu_isa import cpu_info
from tphyolo.training.config import TrainConfig
from tphyolo.training.hooks.base import TrainHook
from tphyolo.training.trainer import Trainer

RECIPES = {  # name: (what it is, train settings, how its user infers: image size, slicing)
    "a": ("whole images at 640", {"imgsz": 640}, (640, None)),
    "b": ("whole images at 1536, batch 2", {"imgsz": 1536, "batch": 2}, (1536, None)),
    "c": ("tiles of 640 at native resolution", {"imgsz": 640, "tile": True}, (640, SliceConfig(640))),
}
SMALL = (16, 32)  # the size bounds of the small-object APs, pixels


CLOCKS = {"cpu": time.process_time, "wall": time.monotonic}  # --clock: what a run's minutes count


class OutOfTime(Exception):
    """The run has trained its time."""


class Budgeted:
    """A training loader that stops yielding once `deadline()` has passed (the rest of the epoch is not trained)."""

    def __init__(self, loader, deadline, clock: str) -> None:
        self.loader, self.deadline, self.clock = loader, deadline, clock

    def __iter__(self):
        for batch in self.loader:
            if CLOCKS[self.clock]() > self.deadline():
                return
            yield batch

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class TimedTrainer(Trainer):
    """A Trainer whose run stops after `seconds` of training on `clock` (from the first batch's request)."""

    seconds: float = 60.0
    clock: str = "cpu"

    def _build(self, resume_from) -> None:
        super()._build(resume_from)
        self.started: float | None = None
        self.data = replace(self.data, train_loader=Budgeted(self.data.train_loader, self._deadline, self.clock))

    def _deadline(self) -> float:
        if self.started is None:
            self.started = CLOCKS[self.clock]()
        return self.started + self.seconds

    def elapsed(self) -> float:
        return CLOCKS[self.clock]() - self.started


def train_for(cfg: TrainConfig, seconds: float, clock: str) -> tuple[Path, int, float, float]:
    """Train `cfg` for `seconds` of `clock`; its last.pt (EMA weights), the epochs begun, the seconds of `clock`
    from the first batch to the end of the last epoch (its last step and checkpoint) and the wall seconds."""
    epochs, ended = [], []

    class Clock(TrainHook):
        def after_epoch(self, trainer: TimedTrainer, epoch: int, metrics: dict) -> None:
            epochs.append(epoch)
            ended.append(trainer.elapsed())
            if CLOCKS[clock]() > trainer._deadline():
                raise OutOfTime

    timed = type("Timed", (TimedTrainer,), {"seconds": seconds, "clock": clock})
    trainer = timed(cfg, RuntimeConfig(device="cpu"), verbose=False, hooks=[Clock()])
    began = time.monotonic()
    with contextlib.suppress(OutOfTime):
        trainer.fit()
    return trainer.weights_dir / "last.pt", len(epochs), ended[-1], time.monotonic() - began


def size_ap50(images, names, bound: float) -> float:
    """AP50 (VisDrone protocol) of the objects whose sqrt(area) is under `bound` (module docstring)."""
    kept = []
    for image in images:
        sides = ((image.boxes[:, 2:] - image.boxes[:, :2]).clamp(min=0).prod(1)).sqrt()
        small = sides < bound
        det = image.detections
        det_sides = ((det[:, 2:4] - det[:, :2]).clamp(min=0).prod(1)).sqrt()
        kept.append(replace(image, classes=image.classes[small], boxes=image.boxes[small],
                            crowd=None if image.crowd is None else image.crowd[small],
                            ignore=torch.cat([image.ignore.reshape(-1, 4), image.boxes[~small]]),
                            detections=det[det_sides < 2 * bound]))  # fmt: skip
    scorer = MetricsEvaluator(names=names, protocol="visdrone")
    scorer.process(kept)
    return float(scorer.evaluate()["metrics"].map50)


def step_memory_mb(model_name: str, nc: int, *, batch: int, imgsz: int) -> float:
    """Peak MiB of one training step at `batch` x `imgsz`^2 (module docstring)."""
    torch.manual_seed(0)
    runtime = RuntimeConfig(device="cpu")
    model = runtime.prepare_model(build_model(model_name, num_classes=nc).train(), torch.device("cpu"))
    images = runtime.prepare_images(torch.randint(0, 256, (batch, 3, imgsz, imgsz), dtype=torch.uint8),
                                    torch.device("cpu"))  # fmt: skip
    step = train_step(model, model, images, synthetic_targets(batch, nc), runtime, imgsz)
    step()  # the optimiser's state exists before the measured step, as in training
    return peak_memory_mb(step, device=torch.device("cpu"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="synthetic-large")
    parser.add_argument("--model", default="tph-yolov5n")
    parser.add_argument("--minutes", type=float, default=4.0, help="training time of each run, on --clock")
    parser.add_argument(
        "--clock",
        default="cpu",
        choices=list(CLOCKS),
        help="cpu: the training process's CPU time (default; load-independent); wall: the clock",
    )
    parser.add_argument("--weights", default=None, help="checkpoint all three runs start from (default: scratch)")
    parser.add_argument("--batch", type=int, default=8, help="batch of (a) and (c)")
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--project", default="runs/tile-bench")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="loader workers (default: 0 with --clock cpu, so the loading is counted; 1 with wall)",
    )
    parser.add_argument("--nbs", type=int, default=None, help="nominal batch (default: the data's recipe)")
    args = parser.parse_args()
    workers = args.workers if args.workers is not None else int(args.clock == "wall")
    rows = []
    for name in args.recipes:
        what, settings, (imgsz, slicing) = RECIPES[name]
        cfg = TrainConfig(data=args.data, model=args.model, epochs=30, workers=workers, val=False, plots=False,
                          warmup_min_steps=10, project=args.project, name=name, nominal_batch=args.nbs,
                          weights=args.weights,
                          **{"batch": args.batch, **settings})  # fmt: skip
        weights, epochs, trained, wall = train_for(cfg, 60 * args.minutes, args.clock)
        inference = replace(VALIDATION, imgsz=imgsz, batch=4, backend="pytorch")
        results = val(weights, args.data, ValConfig(protocol="visdrone", keep_images=True), slicing=slicing,
                      inference=inference, runtime=RuntimeConfig(device="cpu"))  # fmt: skip
        names = list(results.names)
        small = [size_ap50(results.image_results, names, bound) for bound in SMALL]
        memory = step_memory_mb(args.model, len(names), batch=cfg.batch, imgsz=cfg.imgsz)
        rows.append((name, what, cfg.batch, epochs, trained, results.map50, *small, memory))
        print(
            f"({name}) {what}: {epochs} epoch(s) begun in {trained:.0f} s of {args.clock} time ({wall:.0f} s of "
            f"the clock, start-up included); mAP50 {results.map50:.3f}, "
            f"AP50<16 {small[0]:.3f}, AP50<32 {small[1]:.3f}, step peak {memory:.0f} MiB",
            flush=True,
        )
    print()
    columns = (
        f"batch | epochs begun | trained s ({args.clock}) | mAP50 | AP50 < 16 px | AP50 < 32 px | peak MiB per step"
    )
    print(f"| run | {columns} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, what, batch, epochs, trained, map50, ap16, ap32, memory in rows:
        print(
            f"| ({name}) {what} | {batch} | {epochs} | {trained:.0f} | {map50:.3f} | {ap16:.3f} | {ap32:.3f} | "
            f"{memory:.0f} |"
        )
    cpu = cpu_info()
    print(
        f"\nCPU: {cpu.model}, {os.cpu_count()} CPUs, {' '.join(cpu.isa)}; torch {torch.__version__}; "
        f"data {args.data}, model {args.model}, {args.minutes:g} min of {args.clock} time each, "
        f"from {args.weights or 'scratch'}; load average at the end {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()

"""What the memory format of the convolutions gains: the same model and pass in NCHW (the baseline) and in NHWC
(channels last, what `RuntimeConfig` picks for inference on the CPU), interleaved in one process with the commands'
process settings (`configure_process`). Prints the median time of each and the median of the paired ratios
NCHW / NHWC with their quartiles (above 1: NHWC is faster).

    python benchmarks/memory_format.py --model tph-yolov5n --img 1536 --batch 2 --mode infer --pairs 5

`--mode infer` times an eval-mode forward of the fused model under no_grad (as `val` and `predict` run it);
`--mode train` a train-mode forward, the loss on synthetic targets, backward and an SGD step (the steps
`tphyolo bench model` times, `tphyolo.bench.model.infer_step` and `train_step`).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch

from tphyolo.bench.model import infer_step, synthetic_images, synthetic_targets, train_step
from tphyolo.models.build import build_model
from tphyolo.runtime.config import RuntimeConfig, configure_process
from tphyolo.runtime.interleaved import time_interleaved


def step_in(layout: bool, args: argparse.Namespace) -> Callable[[], None]:
    """The timed step of `args` with channels_last = `layout`, on a model of its own (same seed, same weights)."""
    torch.manual_seed(0)
    runtime = RuntimeConfig(device="cpu", amp="off", channels_last=layout)
    device = torch.device("cpu")
    model = build_model(args.model, num_classes=10)
    images = runtime.prepare_images(synthetic_images(args.batch, args.img), device, training=args.mode == "train")
    if args.mode == "infer":
        return infer_step(runtime.place_model(model.eval().fuse(), device), images, runtime)
    model = runtime.place_model(model, device, training=True)
    return train_step(model, model, images, synthetic_targets(args.batch, 10), runtime, args.img)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="yolov5n")
    parser.add_argument("--img", type=int, default=320)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--mode", choices=("infer", "train"), default="infer")
    parser.add_argument("--pairs", type=int, default=10, help="timed pairs after two untimed ones")
    args = parser.parse_args()
    configure_process(RuntimeConfig(device="cpu"))
    steps = {"NCHW": step_in(False, args), "NHWC": step_in(True, args)}
    times = dict(zip(steps, time_interleaved(list(steps.values()), warmup=2, rounds=args.pairs), strict=True))
    ratios = [a / b for a, b in zip(times["NCHW"], times["NHWC"], strict=True)]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    medians = ", ".join(f"{name} {1e3 * statistics.median(t):.1f} ms" for name, t in times.items())
    print(
        f"{args.model} {args.img} px batch {args.batch} {args.mode}, {torch.get_num_threads()} threads: {medians}; "
        f"NCHW / NHWC paired median {statistics.median(ratios):.2f}x "
        f"(quartiles {quartiles[0]:.2f}-{quartiles[2]:.2f}, {len(ratios)} pairs)"
    )


if __name__ == "__main__":
    main()

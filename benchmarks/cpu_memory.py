"""What keeping large freed CPU blocks for reuse (`tphyolo.runtime.cpu_memory`, on by default in every command that
runs a model) gains: the same model and pass timed in child processes with glibc's default malloc thresholds (the
baseline) and with tphyolo's, alternated round by round. Prints, per round, the median time of a pass in each and
their ratio, then the median of the paired ratios, with page faults per pass and peak resident memory.

    python benchmarks/cpu_memory.py --model tph-yolov5n --img 1536 --batch 2 --mode infer --rounds 4

`--mode infer` is an eval-mode forward under no_grad; `--mode train` a train-mode forward, the loss (`YoloLoss`,
hyp scratch-low) on synthetic targets, backward and an SGD step: the steps `tphyolo bench model` times
(`tphyolo.bench.model.infer_step`, `train_step`). The
process must be started anew for each setting: glibc's default thresholds cannot be restored once changed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from tphyolo.runtime.cpu_memory import USER_SETTINGS_ENV, keep_freed_blocks


def child(args: argparse.Namespace) -> None:
    """Time `args.passes` passes after two untimed ones; print one JSON line."""
    import resource
    import time

    if args.child == "kept" and keep_freed_blocks() != "tphyolo":
        raise SystemExit("glibc's malloc thresholds could not be raised here")
    import torch

    from tphyolo.bench.model import infer_step, synthetic_images, synthetic_targets, train_step
    from tphyolo.models.build import build_model
    from tphyolo.runtime.config import RuntimeConfig

    torch.manual_seed(0)
    model = build_model(args.model, num_classes=10)
    images = synthetic_images(args.batch, args.img).float() / 255
    runtime = RuntimeConfig(device="cpu", amp="off")
    if args.mode == "infer":
        run = infer_step(model, images, runtime)
    else:
        run = train_step(model, model, images, synthetic_targets(args.batch, 10), runtime, args.img)

    run(), run()
    times = []
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(args.passes):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / args.passes
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"ms": 1e3 * statistics.median(times), "faults": faults, "rss_mib": rss}))


def _describe(run: dict) -> str:
    return f"{run['ms']:.1f} ms ({run['faults']:.0f} faults/pass, peak {run['rss_mib']:.0f} MiB)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tph-yolov5n")
    parser.add_argument("--img", type=int, default=1536)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--mode", choices=("infer", "train"), default="infer")
    parser.add_argument("--passes", type=int, default=3, help="timed passes per process (default 3)")
    parser.add_argument("--rounds", type=int, default=4, help="pairs of processes (default 4)")
    parser.add_argument("--child", choices=("default", "kept"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    env = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS_ENV}
    base = [sys.executable, __file__, *sys.argv[1:]]
    print(f"{args.model} img{args.img} b{args.batch} {args.mode}: baseline = the same in a process with glibc's "
          "default malloc thresholds")  # fmt: skip
    ratios, runs = [], {"default": [], "kept": []}
    for r in range(args.rounds):
        order = ("default", "kept") if r % 2 == 0 else ("kept", "default")
        for setting in order:
            out = subprocess.run([*base, "--child", setting], env=env, capture_output=True, text=True, check=True)
            runs[setting].append(json.loads(out.stdout.strip().splitlines()[-1]))
        d, k = runs["default"][-1], runs["kept"][-1]
        ratios.append(d["ms"] / k["ms"])
        print(f"round {r + 1}: default {_describe(d)}, kept {_describe(k)}: {ratios[-1]:.2f}x")
    ratios.sort()
    print(f"kept / default: paired speedup {statistics.median(ratios):.2f}x (range {ratios[0]:.2f}-{ratios[-1]:.2f}, "
          f"{args.rounds} rounds); load average {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()

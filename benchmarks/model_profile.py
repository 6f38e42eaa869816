"""Where a model's time goes: the top operators of a training step and of a fused inference pass, by
`torch.profiler`'s self CPU time, in NCHW and NHWC (channels_last), as markdown tables.

    python benchmarks/model_profile.py                                  # tph-yolov5n, 320 px, train b8, infer b1
    python benchmarks/model_profile.py --models tph-yolov5n,tph-yolov5l --json profile.json

A training step is forward, a loss (the mean square of the head's outputs, so that the step is the model's
alone), backward and an SGD step, on random images; inference is the fused model in eval under
`torch.inference_mode`. Each configuration runs `--warmup` untimed steps, then `--steps` profiled ones. Run it
on two source trees (PYTHONPATH) to compare a change: the shares are of that tree's own total.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

FORMATS = ("nchw", "nhwc")


def profile_one(name: str, mode: str, fmt: str, args) -> dict:
    """{total_ms per step, ops: [(op, self ms per step, share)]} for one model, mode and layout."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from tphyolo.models.build import build_model

    torch.manual_seed(0)
    layout = torch.channels_last if fmt == "nhwc" else torch.contiguous_format
    model = build_model(name, num_classes=10)
    if mode == "infer":
        model = model.fuse().eval().to(memory_format=layout)
        images = torch.rand(args.infer_batch, 3, args.img, args.img).contiguous(memory_format=layout)

        def step() -> None:
            with torch.inference_mode():
                model(images)
    else:
        model = model.train().to(memory_format=layout)
        images = torch.rand(args.train_batch, 3, args.img, args.img).contiguous(memory_format=layout)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

        def step() -> None:
            outputs = model(images)
            outputs = outputs if isinstance(outputs, list | tuple) else [outputs]
            sum(out.float().square().mean() for out in outputs).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    ops = [(e.key, e.self_cpu_time_total / 1000 / args.steps, e.self_cpu_time_total / total) for e in events]
    return {"total_ms": total / 1000 / args.steps, "ops": ops[: args.top]}


def table(name: str, mode: str, fmt: str, result: dict) -> str:
    lines = [f"\n{name} {mode} {fmt}: {result['total_ms']:.1f} ms of operator time per step\n",
             "| operator | ms per step | share |", "| --- | --- | --- |"]  # fmt: skip
    lines += [f"| `{op}` | {ms:.1f} | {share:.1%} |" for op, ms, share in result["ops"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="tph-yolov5n", help="comma-separated built-in model names")
    parser.add_argument("--modes", default="train,infer")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--img", type=int, default=320)
    parser.add_argument("--train-batch", type=int, default=8)
    parser.add_argument("--infer-batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=8, help="operators per table")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}, {args.img} px, train batch {args.train_batch}, infer batch {args.infer_batch}; "
          f"load {os.getloadavg()[0]:.1f}; torch {torch.__version__}")  # fmt: skip
    flags = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    isa = sorted({f for line in flags.splitlines() if line.startswith("Flags") for f in line.split()
                  if f.startswith(("avx512", "amx", "avx2"))})  # fmt: skip
    print("ISA flags:", " ".join(isa))
    results = {}
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            for fmt in args.formats.split(","):
                result = profile_one(name, mode, fmt, args)
                results[f"{name} {mode} {fmt}"] = result
                print(table(name, mode, fmt, result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

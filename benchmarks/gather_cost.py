"""What the gathering of a distributed validation costs: the share of a 2-process validation (torchrun, gloo, CPU)
spent outside inference, against one process validating alone.

    python benchmarks/gather_cost.py [--images 32] [--img 320] [--batch 4] [--model tph-yolov5n] [--rounds 2]

A random-weight model at conf 0.001 keeps `--max-det` detections an image, the most a gather carries. The script
runs itself under torchrun, each process with 1 thread, alternating 1 process (the baseline: one process
validating alone) and 2 processes (ideally 2x faster), `--rounds` times each, so that a machine shared with
other work slows both alike; each round is reported on its own. Each process validates twice and keeps the
second (the first warms up oneDNN) and times: inference (its batches), waiting for the other rank (a barrier: the
imbalance of the shares), the gather of the per-image results and speeds on rank 0, and rank 0's scoring.
"Outside inference" is wait + gather + scoring.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=32, help="validation images (synthetic scenes)")
    parser.add_argument("--img", type=int, default=320, help="image size")
    parser.add_argument("--batch", type=int, default=4, help="validation batch")
    parser.add_argument("--model", default="tph-yolov5n", help="model yaml or built-in name (random weights)")
    parser.add_argument("--max-det", type=int, default=300, help="detections kept per image")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs (1 process, then 2)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the data and results (default: temp)")
    return parser.parse_args(argv)


def validate(args: argparse.Namespace, data: Path) -> dict[str, float]:
    """One validation of this process's share, timed by phase (ms); every rank of a torchrun run calls it."""
    import torch

    from tphyolo.data.dataset_config import load_data_config
    from tphyolo.data.loader import DatasetSettings, LoaderSettings, build_dataloader, build_dataset
    from tphyolo.evaluation.loop import collect_results, gather_speed
    from tphyolo.evaluation.scoring import score_images
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.models import build_model
    from tphyolo.runtime.config import RuntimeConfig
    from tphyolo.runtime.distributed import DistContext, barrier
    from tphyolo.runtime.sharding import Shard

    dist = DistContext.from_env()
    torch.manual_seed(0)
    config = load_data_config(data)
    model = build_model(args.model, names=config.names).eval()
    dataset, _ = build_dataset(
        config, "val", DatasetSettings(imgsz=args.img, rect=True, batch_size=args.batch, stride=32)
    )
    shard = Shard.of(len(dataset), unit=args.batch, ctx=dist)
    loader = build_dataloader(
        dataset, LoaderSettings(batch_size=args.batch, indices=shard.indices if dist.distributed else None)
    )
    inference = InferenceConfig(conf=0.001, iou=0.6, max_det=args.max_det)
    runtime = RuntimeConfig(device="cpu")
    t0 = time.perf_counter()
    results, speed = collect_results(model, loader, config=inference, runtime=runtime, device=torch.device("cpu"))
    t1 = time.perf_counter()
    barrier(dist)
    t2 = time.perf_counter()
    gathered = results
    if dist.distributed:
        speed = gather_speed(shard, speed, len(results))
        gathered = shard.gather(results)
    t3 = time.perf_counter()
    if gathered is not None:
        score_images(gathered, names=config.names, max_det=args.max_det)
    t4 = time.perf_counter()
    detections = sum(len(r.detections) for r in results)
    return {"inference": 1e3 * (t1 - t0), "wait": 1e3 * (t2 - t1), "gather": 1e3 * (t3 - t2),
            "score": 1e3 * (t4 - t3), "total": 1e3 * (t4 - t0), "images": len(results), "detections": detections}


def worker(args: argparse.Namespace) -> None:
    """Under torchrun: every rank validates its share; rank 0 writes every rank's timings."""
    import torch

    from tphyolo.runtime.distributed import DistContext, destroy_process_group, gather_to_main, init_process_group

    dist = DistContext.from_env()
    init_process_group(dist, torch.device("cpu"))
    validate(args, args.work / "data.yaml")  # warm-up
    every = gather_to_main(dist, validate(args, args.work / "data.yaml"))
    if every is not None:
        (args.work / f"processes{dist.world_size}.json").write_text(json.dumps(every))
    destroy_process_group(dist)


def report(one: dict[str, float], ranks: list[dict[str, float]]) -> None:
    main = ranks[0]
    outside = main["wait"] + main["gather"] + main["score"]
    print(f"{one['images']} images, {one['detections']} detections (about {one['detections'] * 24 / 1e6:.1f} MB of "
          "boxes and scores to gather)")  # fmt: skip
    print(f"baseline, one process (1 thread): inference {one['inference']:.0f} ms, scoring {one['score']:.0f} ms, "
          f"total {one['total']:.0f} ms")  # fmt: skip
    for rank, t in enumerate(ranks):
        print(f"rank {rank} of 2 (1 thread): {t['images']} images, inference {t['inference']:.0f} ms, waiting "
              f"{t['wait']:.0f} ms, gather {t['gather']:.1f} ms, scoring {t['score']:.0f} ms, "
              f"total {t['total']:.0f} ms")
    print(f"2-process validation, rank 0: outside inference {outside / main['total']:.1%} of its time "
          f"(gather alone {main['gather'] / main['total']:.2%}, waiting {main['wait'] / main['total']:.1%}, "
          f"scoring {main['score'] / main['total']:.1%})")
    print(f"speed-up against the one-process baseline: {one['total'] / main['total']:.2f}x (ideal 2x)")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if "RANK" in os.environ:
        return worker(args)
    from tphyolo.data.builtin.synthetic import generate_synthetic

    with tempfile.TemporaryDirectory() as tmp:
        args.work = Path(args.work or tmp).resolve()
        generate_synthetic(args.work, n_train=1, n_val=args.images, imgsz=max(args.img, 256), seed=0)
        path = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)
        for round_ in range(1, args.rounds + 1):
            for processes in (1, 2):
                cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
                       __file__, "--images", str(args.images), "--img", str(args.img), "--batch", str(args.batch),
                       "--model", args.model, "--max-det", str(args.max_det), "--work", str(args.work)]  # fmt: skip
                subprocess.run(cmd, check=True, env=env)
            (one,) = json.loads((args.work / "processes1.json").read_text())
            print(f"round {round_} of {args.rounds}")
            report(one, json.loads((args.work / "processes2.json").read_text()))


if __name__ == "__main__":
    main()

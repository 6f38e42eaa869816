"""`tphyolo profile`: torch.profiler over a few training (or inference) steps of a model at a size
(`tphyolo.bench.profiling`).

    tphyolo profile --model tph-yolov5l --img 640 --batch 2 --steps 3 --out runs/profile
    tphyolo profile --model tph-yolov5-swins --mode infer --device cuda --amp bf16 --memory --tensorboard

Writes to --out: `trace.json` (chrome://tracing or https://ui.perfetto.dev), `ops.txt` (the top-k operator
table, also printed), `modules.txt` (forward time per module type, per head part, and of the TPH-attention
and P2 branches, from `record_function` ranges opened by forward hooks); with --memory on CUDA also
`memory_snapshot.pickle` (https://pytorch.org/memory_viz) and `memory_timeline.html`; with --tensorboard a
TensorBoard trace under `tensorboard/`; with --compile `compile.json` (also printed): the graphs compiled, the
graph breaks and the recompilations, with their reasons. The runtime flags are those of training, applied as
everywhere by `RuntimeConfig` (`place_model`, `compile_model`, `prepare_images`, `autocast`, `sdpa_context`).
"""

from __future__ import annotations

import argparse

from tphyolo.bench.profiling import ProfileConfig, profile_model
from tphyolo.flags import add_flags, from_flags

USES_RUNTIME = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, ProfileConfig)


def run(args: argparse.Namespace) -> int:
    config = from_flags(ProfileConfig, args)
    report = profile_model(config, args.runtime, log=lambda line: print(line, flush=True))
    print(f"== top {config.top} operators: {report.title} ==")
    print(report.ops_table)
    print(report.modules)
    if report.compile_text is not None:
        print(report.compile_text)
    print(f"wrote {', '.join(str(path) for path in report.files[:3])}")
    return 0

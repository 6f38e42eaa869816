"""`tphyolo bench`: time what a user chooses on their machine, print a table, write JSON.

    tphyolo bench model --model tph-yolov5l --img 640 --batch 2 --variants eager,channels_last  # each vs eager
    tphyolo bench data --workers 0,1,2
    tphyolo bench model data --quick          # tiny sizes, seconds
    tphyolo bench startup --model tph-yolov5n --img 320 --compile   # cold vs warm start, fresh processes
    tphyolo bench serve --weights best.pt --img 640   # the HTTP service: 1 and 16 callers, 48 requests each
    tphyolo bench predict --model tph-yolov5l --img 640 --batch 1 --tta  # exported runtimes vs PyTorch eager

What belongs here: a benchmark that answers a user's question about settings on their own machine (runtime
variants, exported runtimes, loader workers, service batching, start-up cost). A study of our implementation
against another one (the attention blocks and the whole model against the original computation, WBF against
ensemble_boxes, COCO evaluation against pycocotools) is a script in the repository's benchmarks/, which prints
the same table.

The runtime flags (`--device --amp --compile --channels-last --sdpa-backend ...`) are those of training, and
both sides of every comparison run under them (`tphyolo.bench.suite.run`, which says how `model` sweeps them).
`bench predict` runs on the CPU (`tphyolo.bench.export`): it exports the model (random weights, seed 0) to a
temporary folder, or to `--export-dir`, checks every backend's output against PyTorch's, then times them.
Numbers on a shared machine are noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from tphyolo.bench.suite.settings import BENCHMARKS, BenchSettings
from tphyolo.flags import add_flags, from_flags

USES_RUNTIME = True
# The BenchSettings flags under the heading of the benchmarks that read them (None: every benchmark).
FLAG_GROUPS = {
    None: ("quick", "warmup", "repeats", "batch"),
    "model": ("model", "img", "variants", "model_modes"),
    "predict (also --model, --img, --batch)": ("backends", "tta", "tta_img", "export_dir"),
    "serve (also --img)": ("weights", "url", "concurrency", "requests", "image"),
    "data": ("workers", "data", "data_batches"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="+", choices=BENCHMARKS, help="which benchmarks to run")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    every = {field.name for field in fields(BenchSettings)}
    for title, names in FLAG_GROUPS.items():
        add_flags(parser if title is None else parser.add_argument_group(title), BenchSettings,
                  exclude=every - set(names))  # fmt: skip


def run(args: argparse.Namespace) -> int:
    # lazy: these import torch; 'tphyolo bench -h' must not
    from tphyolo.bench.report import print_report
    from tphyolo.bench.suite.run import run_benchmarks

    settings = from_flags(BenchSettings, args, what=tuple(args.what))
    rows, machine = run_benchmarks(settings, runtime=args.runtime, log=lambda line: print(line, flush=True))
    print_report(rows, machine, json_path=args.json)
    return 0

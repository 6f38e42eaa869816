"""`tphyolo bench`: time our implementation against the original computation, print a table, write JSON.

    tphyolo bench attention --blocks c3tr --scales l --sizes 1536 --batch 2 --json out.json
    tphyolo bench model --model tph-yolov5l --img 640 --batch 2 --variants eager,channels_last
    tphyolo bench wbf                          # 8 lists x 300 boxes x 10 classes against ensemble_boxes
    tphyolo bench eval --images 500            # COCO protocol, ours against pycocotools
    tphyolo bench wbf eval --clock cpu         # process CPU time: steadier on a shared machine
    tphyolo bench data --workers 0,1,2
    tphyolo bench attention model --quick     # tiny sizes, seconds
    tphyolo bench startup --model tph-yolov5n --img 320 --compile   # cold vs warm start, fresh processes
    tphyolo bench serve --weights best.pt --concurrency 1,4,16,64 --requests 200   # the HTTP service's load
    tphyolo bench predict --model tph-yolov5l --img 640 --batch 1 --backends torch,onnxruntime,openvino \
        --baselines ours,original --tta        # exported runtimes against PyTorch eager, plus TTA end to end

The runtime flags (`--device --amp --compile --channels-last --sdpa-backend ...`) are those of training, and
both sides of every comparison run under them (`tphyolo.bench.suite.run`, which says how `model` and
`attention` sweep them). `bench predict` runs on the CPU (`tphyolo.bench.export`): it exports the model (random
weights, seed 0) to a temporary folder, or to `--export-dir`, checks every backend's output against
PyTorch's, then times them. Numbers on a shared machine are noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from tphyolo.bench.suite.settings import BENCHMARKS, BenchSettings
from tphyolo.bench.timing import CLOCKS
from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE

USES_RUNTIME = True
DEFAULT = BenchSettings(what=())  # the flags' defaults


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _ints(text: str, bounds=NON_NEGATIVE) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in _csv(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from error
    if outside := [v for v in values if v not in bounds]:
        raise argparse.ArgumentTypeError(f"each value must be {bounds}, got {outside[0]}")
    return values


def _sizes(text: str) -> tuple[int, ...]:
    return _ints(text, IMGSZ_BOUNDS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="+", choices=BENCHMARKS, help="which benchmarks to run")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and one repeat: checks that it runs")
    parser.add_argument(
        "--warmup", type=NON_NEGATIVE.parser(int), default=None, help="untimed calls before timing (default 1)"
    )
    parser.add_argument(
        "--repeats",
        type=AT_LEAST_ONE.parser(int),
        default=None,
        help="timed calls; the median is reported (default 3; 5 for predict)",
    )
    parser.add_argument("--batch", type=AT_LEAST_ONE.parser(int), default=DEFAULT.batch, help="batch size (default 2)")
    group = parser.add_argument_group("attention")
    group.add_argument("--blocks", type=_csv, default=DEFAULT.blocks, help="c3tr,c3str,clla")
    group.add_argument("--scales", type=_csv, default=DEFAULT.scales, help="model scales n,s,m,l,x (default s)")
    group.add_argument("--sizes", type=_sizes, default=DEFAULT.sizes, help="image sizes (default 640,1536)")
    group.add_argument("--modes", type=_csv, default=DEFAULT.modes, help="eval,train (default both)")
    group.add_argument("--dtypes", type=_csv, default=None, help="fp32,fp16,bf16 (default: fp32 on CPU, all on CUDA)")
    group = parser.add_argument_group("model")
    group.add_argument("--model", default=DEFAULT.model, help="built-in model name (default tph-yolov5s)")
    group.add_argument("--img", type=IMGSZ_BOUNDS.parser(int), default=DEFAULT.img, help="image size (default 640)")
    group.add_argument(
        "--variants", type=_csv, default=None,
        help="eager,channels_last,amp,compile,amp+compile (default: eager,channels_last on CPU; "
        "eager,channels_last,amp,amp+compile on CUDA)",
    )  # fmt: skip
    group.add_argument("--model-modes", type=_csv, default=DEFAULT.model_modes, help="train,infer (default both)")
    group = parser.add_argument_group("predict (also --model, --img, --batch)")
    group.add_argument(
        "--backends", type=_csv, default=DEFAULT.backends,
        help="torch,onnxruntime,openvino,torchscript and the INT8 files onnxruntime-int8,openvino-int8 (calibrated "
        "on --data's train split); default onnxruntime,openvino",
    )  # fmt: skip
    group.add_argument(
        "--baselines", type=_csv, default=DEFAULT.baselines,
        help="ours (our model, PyTorch eager fp32 fused), original (with the original's attention); default ours",
    )  # fmt: skip
    group.add_argument("--tta", action="store_true", help="also time predict with 8-pass TTA + WBF on one image")
    group.add_argument(
        "--tta-img",
        type=IMGSZ_BOUNDS.parser(int),
        default=DEFAULT.tta_img,
        help="TTA image width, pixels (default 1536)",
    )
    group.add_argument("--export-dir", metavar="DIR", help="where the exports go (default: a temporary folder)")
    group = parser.add_argument_group("serve (also --img)")
    group.add_argument("--weights", nargs="+", help="weights the servers load (required for bench serve)")
    group.add_argument("--url", help="a running service on this machine (http://127.0.0.1:PORT) instead")
    group.add_argument(
        "--concurrency", type=lambda t: _ints(t, AT_LEAST_ONE), default=DEFAULT.concurrency, help="default 1,4,16,64"
    )
    group.add_argument(
        "--requests", type=AT_LEAST_ONE.parser(int), default=DEFAULT.requests, help="per level (default 200)"
    )
    group.add_argument("--image", help="the image sent (default: a generated 1280x720 scene)")
    group = parser.add_argument_group("wbf / eval / data")
    group.add_argument("--workers", type=_ints, default=DEFAULT.workers, help="loader worker counts (default 0,1,2)")
    group.add_argument(
        "--images", type=AT_LEAST_ONE.parser(int), default=None, help="images for bench eval (default 500)"
    )
    group.add_argument(
        "--clock", choices=CLOCKS, default=DEFAULT.clock,
        help="how wbf and eval are timed: wall time, or the process's CPU time, which other load disturbs less",
    )  # fmt: skip
    group.add_argument(
        "--data", default=DEFAULT.data, help="dataset yaml or built-in name for bench data and INT8 calibration"
    )
    group.add_argument(
        "--data-batches", type=AT_LEAST_ONE.parser(int), default=None, help="batches per bench data run (default 8)"
    )


def run(args: argparse.Namespace) -> int:
    from tphyolo.bench.report import format_table, write_json  # torch: imported when the command runs, not by -h
    from tphyolo.bench.suite.run import run_benchmarks

    values = {field.name: getattr(args, field.name) for field in fields(BenchSettings)}
    settings = BenchSettings(**{name: tuple(v) if isinstance(v, list) else v for name, v in values.items()})
    rows, machine = run_benchmarks(settings, runtime=args.runtime, log=lambda line: print(line, flush=True))
    print()
    print(format_table(rows))
    print("\nmachine: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    if args.json:
        print(f"wrote {write_json(args.json, machine, rows)}")
    return 0

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
both sides of every comparison run under them, prepared by `RuntimeConfig`. `bench model` sweeps variants of
them (`tphyolo.bench.model.variant_runtime`): `--channels-last` and `--amp bf16|fp16` apply to every variant,
`--amp auto` autocasts the amp variants only, `--amp off` refuses them. On CUDA, `bench attention` sweeps every
SDPA backend and fp32/fp16/bf16 unless `--sdpa-backend`/`--dtypes`/`--amp` narrow it (`--amp off`: fp32
only). `bench predict` runs on the CPU (`tphyolo.bench.export`): it exports the model (random weights,
seed 0) to a temporary folder, or to `--export-dir`, checks every backend's output against PyTorch's, then
times them. Numbers on a shared machine are noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

from tphyolo.bench.timing import CLOCKS
from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.errors import UsageError
from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE
from tphyolo.runtime.flags import SDPA_BACKEND_NAMES

if TYPE_CHECKING:  # the benchmarks import torch when they run, not when `tphyolo bench -h` parses
    import torch

    from tphyolo.bench.report import Row
    from tphyolo.runtime.config import RuntimeConfig

USES_RUNTIME = True

BENCHMARKS = ("attention", "model", "wbf", "eval", "data", "predict", "startup", "serve")


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
    parser.add_argument("--batch", type=AT_LEAST_ONE.parser(int), default=2, help="batch size (default 2)")
    group = parser.add_argument_group("attention")
    group.add_argument("--blocks", type=_csv, default=("c3tr", "c3str", "clla"), help="c3tr,c3str,clla")
    group.add_argument("--scales", type=_csv, default=("s",), help="model scales n,s,m,l,x (default s)")
    group.add_argument("--sizes", type=_sizes, default=(640, 1536), help="image sizes (default 640,1536)")
    group.add_argument("--modes", type=_csv, default=("eval", "train"), help="eval,train (default both)")
    group.add_argument("--dtypes", type=_csv, default=None, help="fp32,fp16,bf16 (default: fp32 on CPU, all on CUDA)")
    group = parser.add_argument_group("model")
    group.add_argument("--model", default="tph-yolov5s", help="built-in model name (default tph-yolov5s)")
    group.add_argument("--img", type=IMGSZ_BOUNDS.parser(int), default=640, help="image size (default 640)")
    group.add_argument(
        "--variants", type=_csv, default=None,
        help="eager,channels_last,amp,compile,amp+compile (default: eager,channels_last on CPU; "
        "eager,channels_last,amp,amp+compile on CUDA)",
    )  # fmt: skip
    group.add_argument("--model-modes", type=_csv, default=("train", "infer"), help="train,infer (default both)")
    group = parser.add_argument_group("predict (also --model, --img, --batch)")
    group.add_argument(
        "--backends", type=_csv, default=("onnxruntime", "openvino"),
        help="torch,onnxruntime,openvino,torchscript and the INT8 files onnxruntime-int8,openvino-int8 (calibrated "
        "on --data's train split); default onnxruntime,openvino",
    )  # fmt: skip
    group.add_argument(
        "--baselines", type=_csv, default=("ours",),
        help="ours (our model, PyTorch eager fp32 fused), original (with the original's attention); default ours",
    )  # fmt: skip
    group.add_argument("--tta", action="store_true", help="also time predict with 8-pass TTA + WBF on one image")
    group.add_argument(
        "--tta-img", type=IMGSZ_BOUNDS.parser(int), default=1536, help="TTA image width, pixels (default 1536)"
    )
    group.add_argument("--export-dir", metavar="DIR", help="where the exports go (default: a temporary folder)")
    group = parser.add_argument_group("serve (also --img)")
    group.add_argument("--weights", nargs="+", help="weights the servers load (required for bench serve)")
    group.add_argument("--url", help="a running service on this machine (http://127.0.0.1:PORT) instead")
    group.add_argument(
        "--concurrency", type=lambda t: _ints(t, AT_LEAST_ONE), default=(1, 4, 16, 64), help="default 1,4,16,64"
    )
    group.add_argument("--requests", type=AT_LEAST_ONE.parser(int), default=200, help="per level (default 200)")
    group.add_argument("--image", help="the image sent (default: a generated 1280x720 scene)")
    group = parser.add_argument_group("wbf / eval / data")
    group.add_argument("--workers", type=_ints, default=(0, 1, 2), help="loader worker counts (default 0,1,2)")
    group.add_argument(
        "--images", type=AT_LEAST_ONE.parser(int), default=None, help="images for bench eval (default 500)"
    )
    group.add_argument(
        "--clock", choices=CLOCKS, default="wall",
        help="how wbf and eval are timed: wall time, or the process's CPU time, which other load disturbs less",
    )  # fmt: skip
    group.add_argument(
        "--data", default="synthetic", help="dataset yaml or built-in name for bench data and INT8 calibration"
    )
    group.add_argument(
        "--data-batches", type=AT_LEAST_ONE.parser(int), default=None, help="batches per bench data run (default 8)"
    )


def _attention(
    args: argparse.Namespace, device: torch.device, log: Callable[[str], None], measured: dict[str, float]
) -> list[Row]:
    from tphyolo.bench.attention import BLOCKS, DTYPES, AttentionCase, AttentionSettings, bench_attention
    from tphyolo.bench.report import significant
    from tphyolo.bench.timing import matmul_flops_per_s

    runtime: RuntimeConfig = args.runtime
    unknown = [b for b in args.blocks if b not in BLOCKS] + [m for m in args.modes if m not in ("eval", "train")]
    if unknown:
        raise UsageError(f"unknown block or mode {unknown}; blocks: {BLOCKS}, modes: eval, train")
    if args.dtypes is not None:
        dtypes = args.dtypes
    elif runtime.amp in ("bf16", "fp16"):
        dtypes = (runtime.amp,)
    elif runtime.amp == "off":
        dtypes = ("fp32",)
    else:
        dtypes = tuple(DTYPES) if device.type == "cuda" else ("fp32",)
    if any(d not in DTYPES for d in dtypes):
        raise UsageError(f"unknown dtype in {dtypes}; known: {list(DTYPES)}")
    if runtime.amp == "off" and set(dtypes) != {"fp32"}:
        raise UsageError(f"--dtypes {','.join(dtypes)} autocasts; it cannot run under --amp off")
    default_backends = SDPA_BACKEND_NAMES if device.type == "cuda" else (None,)
    backends: tuple[str | None, ...] = runtime.sdpa_backends or default_backends
    if args.quick:
        cases = tuple(AttentionCase(block, "n", 256, 1) for block in args.blocks)
    else:
        cases = tuple(
            AttentionCase(block, scale, size, args.batch)
            for block in args.blocks
            for scale in args.scales
            for size in args.sizes
        )
    rate = matmul_flops_per_s(device=device, size=512 if args.quick else 2048)
    measured["matmul_fp32_gflops"] = significant(rate / 1e9)
    log(f"measured fp32 matmul rate: {rate / 1e9:.1f} GFLOP/s")
    settings = AttentionSettings(
        cases=cases,
        modes=args.modes,
        dtypes=dtypes,
        backends=backends,
        warmup=_pick(args.warmup, args.quick, 1, 0),
        repeats=_pick(args.repeats, args.quick, 3, 1),
        runtime=runtime,
        matmul_flops=rate,
    )
    return bench_attention(settings, device=device, log=log)


def _model(args: argparse.Namespace, device: torch.device, log: Callable[[str], None]) -> list[Row]:
    from tphyolo.bench.model import AMP_VARIANTS, ModelSettings, bench_model, variant_runtime

    runtime: RuntimeConfig = args.runtime
    if args.variants is not None:
        variants = args.variants
    elif device.type == "cuda":
        variants = ("eager", "channels_last", "amp", "amp+compile")
        if runtime.amp == "off":
            log(f"--amp off: no {' or '.join(AMP_VARIANTS)} variant")
            variants = tuple(v for v in variants if v not in AMP_VARIANTS)
    else:
        variants = ("eager", "channels_last")
    for variant in variants:  # an unknown variant, or an amp one under --amp off, fails before any timing
        variant_runtime(runtime, variant, device=device)
    settings = ModelSettings(
        model="tph-yolov5n" if args.quick else args.model,
        image_size=128 if args.quick else args.img,
        batch=1 if args.quick else args.batch,
        variants=variants,
        modes=args.model_modes,
        warmup=_pick(args.warmup, args.quick, 1, 0),
        repeats=_pick(args.repeats, args.quick, 3, 1),
    )
    return bench_model(settings, runtime=runtime, device=device, log=log)


def _predict(args: argparse.Namespace, device: torch.device, log: Callable[[str], None]) -> list[Row]:
    from tphyolo.bench.export import BackendBenchSettings, bench_backends, bench_tta

    if device.type != "cpu":
        raise UsageError(f"bench predict times CPU runtimes; run it with --device cpu, not {device}")
    try:
        settings = BackendBenchSettings(
            model="tph-yolov5n" if args.quick else args.model,
            imgsz=64 if args.quick else args.img,
            batch=1 if args.quick else args.batch,
            backends=args.backends,
            baselines=args.baselines,
            warmup=_pick(args.warmup, args.quick, 1, 0),
            repeats=_pick(args.repeats, args.quick, 5, 1),
            tta_imgsz=128 if args.quick else args.tta_img,
            int8_data=args.data,
            calib_images=4 if args.quick else 32,
        )
    except ValueError as error:
        raise UsageError(str(error)) from error
    with tempfile.TemporaryDirectory(prefix="tphyolo-bench-") as tmp:
        workdir = args.export_dir or tmp
        rows = bench_backends(settings, workdir=workdir, log=log)
        if args.tta:
            rows += bench_tta(settings, workdir=workdir, log=log)
    return rows


def _serve(args: argparse.Namespace) -> list[Row]:
    from tphyolo.bench.serve import ServeBenchSettings, bench_serve, check_loopback

    if not args.weights:
        raise UsageError("bench serve needs --weights (what the servers load, and the in-process baseline)")
    try:
        url = None if args.url is None else check_loopback(args.url)
    except ValueError as error:
        raise UsageError(str(error)) from error
    settings = ServeBenchSettings(weights=tuple(args.weights), imgsz=args.img, concurrency=args.concurrency,
                                  requests=args.requests, url=url, image=args.image)  # fmt: skip
    return bench_serve(settings, log=print)


def _pick(explicit: int | None, quick: bool, normal: int, tiny: int) -> int:
    return explicit if explicit is not None else (tiny if quick else normal)


def run(args: argparse.Namespace) -> int:
    from tphyolo.bench.report import format_table, machine_info, write_json

    if {"model", "predict", "startup"} & set(args.what):  # the model is checked before any timing
        from tphyolo.models.build import load_model_config

        try:
            load_model_config(args.model)
        except (ValueError, OSError) as error:
            raise UsageError(f"--model {args.model}: {error}") from error
    device = args.runtime.torch_device()
    rows: list[Row] = []
    measured: dict[str, float] = {}
    for what in dict.fromkeys(args.what):
        print(f"== bench {what} on {device} ==", flush=True)
        if what == "attention":
            rows += _attention(args, device, print, measured)
        elif what == "model":
            rows += _model(args, device, print)
        elif what == "wbf":
            from tphyolo.bench.wbf import bench_wbf

            repeats = _pick(args.repeats, args.quick, 5, 1)
            rows += bench_wbf(quick=args.quick, repeats=repeats, clock=args.clock, log=print)
        elif what == "eval":
            from tphyolo.bench.eval import bench_eval

            images = args.images or (20 if args.quick else 500)
            repeats = _pick(args.repeats, args.quick, 3, 1)
            rows += bench_eval(images=images, repeats=repeats, clock=args.clock, log=print)
        elif what == "data":
            from tphyolo.bench.data import bench_data

            batches = args.data_batches or (2 if args.quick else 8)
            size = 128 if args.quick else args.img
            rows += bench_data(image_size=size, batch=args.batch, workers=args.workers, batches=batches,
                              data=args.data, log=print)  # fmt: skip
        elif what == "startup":
            from tphyolo.bench.startup import StartupSettings, bench_startup

            runtime: RuntimeConfig = args.runtime
            settings = StartupSettings(data=args.data, model="tph-yolov5n" if args.quick else args.model,
                                       image_size=128 if args.quick else args.img, batch=args.batch,
                                       device=runtime.device, compile=runtime.compile)  # fmt: skip
            rows += bench_startup(settings, log=print)
        elif what == "predict":
            rows += _predict(args, device, print)
        elif what == "serve":
            rows += _serve(args)
    machine = machine_info(device, **measured)
    print()
    print(format_table(rows))
    print("\nmachine: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    if args.json:
        print(f"wrote {write_json(args.json, machine, rows)}")
    return 0

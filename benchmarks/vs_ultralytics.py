"""The README's main job beside what a user would pick instead: tphyolo's tph-yolov5n and ultralytics' YOLO11n and
YOLO26n, each trained from scratch on the built-in synthetic set at the same image size and batch, timed epoch by
epoch, then scored by one evaluator.

    PYTHONPATH=/path/to/ultralytics python benchmarks/vs_ultralytics.py               # the README's 20 epochs
    PYTHONPATH=/path/to/ultralytics python benchmarks/vs_ultralytics.py --peer-epochs 60   # time to a mAP50
    PYTHONPATH=/path/to/ultralytics python benchmarks/vs_ultralytics.py --epochs 3 --img 640 --json out.json
    PYTHONPATH=/path/to/ultralytics python benchmarks/vs_ultralytics.py --steps --weights best.pt   # no training
    PYTHONPATH=/path/to/ultralytics python benchmarks/vs_ultralytics.py --profile --threads 1        # by operator

What runs: the synthetic set (`tphyolo.data.builtin.synthetic`, 80 training and 20 validation scenes at 640 px,
VisDrone format) is converted to YOLO format with `tphyolo.data.convert.convert_visdrone` (class = VisDrone
category - 1, ten class names) for ultralytics; `tphyolo train` trains on the set as the README's first command
does (tph-yolov5n, AdamW, its synthetic recipe) for `--epochs`, and ultralytics trains `yolo11n.yaml` and
`yolo26n.yaml` (no pretrained weights, so nothing is downloaded; plots off; its own default recipe) for
`--peer-epochs` (default: the same), each training in a child process of its own, timed in wall-clock seconds
and in CPU seconds of that child. While a child trains, this process looks at its results.csv every 0.1 s and
notes when each epoch's row appears, seconds from the child's start: the same clock for both tools, each with
its own loader and its own validation after every epoch. From those: the first epoch's time (start-up, data
caching and the first validation included), the median time of the later epochs, and the time from the start to
the first epoch whose own val mAP50 reached 0.1, 0.3, 0.5 and 0.7 (each tool's own validation: the same 20
images, its own NMS and AP). Each tool's own val mAP50 is the last epoch's. Then every model predicts the 20
validation images at the same size, conf 0.001, one image at a time, in this process: the detections are
written as VisDrone result files and scored by `tphyolo eval --protocol coco` against the set's VisDrone
annotations, each class written under the number the set's files give it (its category table,
`tphyolo.data.categories`): COCO mAP50 and mAP50-95, the same evaluator, images and thresholds for all three.
The inference time is the median milliseconds per image at conf 0.25 (both tools' predict default), the three
models taking turns image by image over --rounds passes, after two warm-up images each.

With `--steps`, the trainings are skipped and the models' computation is measured instead, in one run, the
candidates taking turns call by call (A B C A B C ..., median over `--repeats` rounds after one warm-up call each):
tphyolo's tph-yolov5n against ultralytics' YOLO11n and YOLO26n, all with random weights built from their yamls
(nothing is downloaded) and ten classes:

- the bare train step at `--img` px (320), batch `--batch` (8): forward in train mode, each tool's own loss on the
  same targets (20 random boxes per image; tphyolo's `YoloLoss` with hyp "scratch-low", ultralytics'
  `model.loss` with its default hyperparameters), backward and an SGD step (momentum 0.937, Nesterov), in NCHW
  fp32, NHWC fp32 and, where the CPU has native bf16 (AVX512-BF16 or AMX-BF16), both under bf16 autocast
  (each tool's loss where its trainer computes it: tphyolo's outside autocast, ultralytics' inside);
- the fused model's inference at 320 and 640 px, batch 1, NCHW and NHWC fp32;
- the time per image through each tool's default Python API, on a real drone image letterboxed to 640 px:
  `tphyolo.predict.predictor.Predictor` on `--weights` (the README main job's best.pt) against
  `YOLO("yolo11n.yaml").predict` and `YOLO("yolo26n.yaml").predict`, each at its own defaults but the device.

It prints the ratios tphyolo / ultralytics (above 1: tphyolo is slower), the CPU's ISA flags and the load.
With `--keep-freed-blocks`, the process keeps freed memory blocks for reuse before measuring
(`tphyolo.runtime.cpu_memory.keep_freed_blocks`, what tphyolo's runtime does for its own commands), so that
neither model's large activations are page-faulted in afresh on every step; both models run in that one process.
Neither side's step holds an EMA update or a data loader: it is the models' and losses' computation alone, with
one optimiser class for both (their trainers would pick otherwise: tphyolo's synthetic recipe AdamW, ultralytics'
`optimizer=auto` AdamW up to 10 000 iterations, MuSGD beyond).

With `--profile`, the NCHW fp32 train step of each model runs under `torch.profiler` instead (one warm-up step,
then `--repeats` profiled ones): a table of the operators with the most self CPU time, ms per step for each
model, to see where one spends more than the other.

ultralytics is a baseline only (AGPL-3.0): it is imported here and nowhere in the package or the tests. Install it
outside the project's environment without replacing torch, e.g. `pip install --no-deps --target DIR ultralytics
ultralytics-thop py-cpuinfo`, and put DIR on PYTHONPATH for this script.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.files.image_io import read_image
from tphyolo.data.formats.visdrone import NAMES

# row -> what trains it: tphyolo's command, or the ultralytics model yaml
MODELS = {
    "tphyolo tph-yolov5n": "tphyolo",
    "ultralytics YOLO11n": "yolo11n.yaml",
    "ultralytics YOLO26n": "yolo26n.yaml",
}
MAP50_MARKS = (0.1, 0.3, 0.5, 0.7)  # the time-to-mAP50 table's columns
POLL_S = 0.1  # how often a training's results.csv is looked at for a new epoch row
PRED_CONF = 0.001  # what the scores are computed from
TIMED_CONF = 0.25  # what the inference time is measured at: both tools' predict default
WARMUP_IMAGES = 2

ULTRALYTICS_TRAIN = """
import sys
from ultralytics import YOLO
yaml, data, epochs, imgsz, batch, workers, project, name = sys.argv[1:]
YOLO(yaml).train(data=data, epochs=int(epochs), imgsz=int(imgsz), batch=int(batch), workers=int(workers),
                 device="cpu", plots=False, pretrained=False, amp=False, seed=0, project=project, name=name,
                 exist_ok=True, verbose=False)
"""


def timed_child(argv: list[str], env: dict[str, str], watch: Path) -> tuple[float, float, list[float]]:
    """(wall seconds, CPU seconds, epoch ends) of a child process running `argv`; raises when it fails. The epoch
    ends are the seconds from the child's start at which each data row of the results.csv `watch` was first seen
    (looked at every `POLL_S`): the same clock for every tool, start-up, data loading and validation included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    watch.unlink(missing_ok=True)  # an earlier run's rows are not this one's epochs
    start = time.perf_counter()
    ends: list[float] = []
    child = subprocess.Popen(argv, env=env)
    while True:
        done = child.poll() is not None
        rows = data_rows(watch)
        ends += [time.perf_counter() - start] * max(0, len(rows) - len(ends))
        if done:
            break
        time.sleep(POLL_S)
    wall = time.perf_counter() - start
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, argv)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), ends


def yolo_copy(work: Path) -> tuple[Path, Path, Path]:
    """(ultralytics data yaml, val image folder, val VisDrone annotation folder) of the synthetic set."""
    from tphyolo.data.convert import convert_visdrone

    data = load_data_config("synthetic")
    shutil.rmtree(work / "yolo", ignore_errors=True)  # a fresh copy, also over an earlier run's
    train_split, val_split = data.train[0].parent, data.val[0].parent  # <split>/images -> <split>
    for role, split in (("train", train_split), ("val", val_split)):
        convert_visdrone(split, work / "yolo" / role, log=lambda line: None)
    names = "\n".join(f"  {i}: {name}" for i, name in enumerate(NAMES))
    yaml = work / "yolo" / "data.yaml"
    yaml.write_text(f"path: {work / 'yolo'}\ntrain: train/images\nval: val/images\nnames:\n{names}\n")
    return yaml, val_split / "images", val_split / "annotations"


def data_rows(csv_path: Path) -> list[dict[str, str]]:
    """The complete data rows of a results.csv as {column: text} (headers may be padded with spaces); none while
    the file is missing, and a last line still being written is left for the next look."""
    try:
        text = csv_path.read_text()
    except FileNotFoundError:
        return []
    lines = [line for line in text.split("\n")[:-1] if line.strip()]  # only lines that ended
    if not lines:
        return []
    header = [h.strip() for h in lines[0].split(",")]
    return [dict(zip(header, (v.strip() for v in line.split(",")), strict=True)) for line in lines[1:]]


def timeline(ends: list[float], csv_path: Path, column: str) -> list[tuple[float, float]]:
    """(seconds from the training's start, that epoch's own val mAP50) per epoch."""
    values = [float(row[column]) for row in data_rows(csv_path)]
    if len(values) != len(ends):
        raise RuntimeError(f"{csv_path}: {len(values)} epoch rows at the end, {len(ends)} seen while it trained")
    return list(zip(ends, values, strict=True))


def epoch_seconds(points: list[tuple[float, float]]) -> tuple[float, float | None]:
    """(seconds to the end of the first epoch, start-up included; median seconds of the later epochs, None with
    only one)."""
    ends = [t for t, _ in points]
    later = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    return ends[0], (statistics.median(later) if later else None)


def seconds_to(points: list[tuple[float, float]], mark: float) -> float | None:
    """Seconds from the start to the end of the first epoch whose own val mAP50 reached `mark`; None if none."""
    return next((t for t, value in points if value >= mark), None)


def train_all(args, work: Path, yaml: Path, env: dict[str, str], record: Path) -> dict[str, dict]:
    """Train each model of `MODELS`: {row: {epochs, wall_s, cpu_s, own_map50, timeline, weights}}, written to
    `record` after each training; with `args.reuse_training`, the rows `record` already holds are taken as they
    are. tphyolo trains `args.epochs`, ultralytics `args.peer_epochs` (default: the same)."""
    runs = work / "runs"
    out = json.loads(record.read_text()) if args.reuse_training and record.is_file() else {}
    for row, model in MODELS.items():
        if row in out:
            continue
        name = row.split()[-1]
        folder = runs / name
        if model == "tphyolo":
            epochs, column = args.epochs, "metrics/mAP50"
            argv = [sys.executable, "-m", "tphyolo", "train", "--epochs", str(epochs), "--img", str(args.img),
                    "--batch", str(args.batch), "--workers", str(args.workers), "--device", "cpu",
                    "--project", str(runs), "--name", name, "--exist-ok"]  # fmt: skip
        else:
            epochs, column = args.peer_epochs or args.epochs, "metrics/mAP50(B)"
            argv = [sys.executable, "-c", ULTRALYTICS_TRAIN, model, str(yaml), str(epochs), str(args.img),
                    str(args.batch), str(args.workers), str(runs), name]  # fmt: skip
        wall, cpu, ends = timed_child(argv, env, folder / "results.csv")
        points = timeline(ends, folder / "results.csv", column)
        out[row] = {"epochs": epochs, "wall_s": wall, "cpu_s": cpu, "own_map50": points[-1][1],
                    "timeline": points, "weights": str(folder / "weights" / "best.pt")}  # fmt: skip
        record.write_text(json.dumps(out, indent=2))
        first, later = epoch_seconds(points)
        print(f"{row}: {epochs} epochs in {wall:.0f} s wall, {cpu:.0f} s CPU; first epoch {first:.1f} s, later "
              f"{later or 0:.1f} s each; own val mAP50 {points[-1][1]:.4f}", flush=True)  # fmt: skip
    return out


def detector(row: str, weights: str, imgsz: int, conf: float):
    """A function image (BGR uint8) -> (boxes (N, 4) xyxy pixels, scores (N,), class names) for `row`."""
    if MODELS[row] == "tphyolo":
        from tphyolo.predict.predictor import Predictor

        predictor = Predictor(weights, imgsz=imgsz, conf=conf, device="cpu")

        def run_tphyolo(image):
            result = predictor(image)[0]
            names = [predictor.names[int(c)] for c in result.labels]
            return result.boxes.numpy(), result.scores.numpy(), names

        return run_tphyolo
    from ultralytics import YOLO

    model = YOLO(weights)

    def run_ultralytics(image):
        boxes = model.predict(image, imgsz=imgsz, conf=conf, device="cpu", verbose=False)[0].boxes
        names = [model.names[int(c)] for c in boxes.cls]
        return boxes.xyxy.numpy(), boxes.conf.numpy(), names

    return run_ultralytics


def categories(row: str) -> dict[str, int]:
    """The category number each class name of `row`'s model is written under in the synthetic set's files: by
    the set's category table (`tphyolo.data.categories`; car 1, bus 2, ...) for tphyolo's model, whose classes are
    the set's; for ultralytics' models, trained on `yolo_copy`'s labels (class = category - 1) under VisDrone's
    ten names, that class + 1."""
    if MODELS[row] == "tphyolo":
        table = load_data_config("synthetic").category_table
        return dict(zip(table.names, table.ids, strict=True))
    return {name: i + 1 for i, name in enumerate(NAMES)}


def predict(row: str, weights: str, images: list[Path], imgsz: int, out: Path) -> int:
    """Write `row`'s VisDrone result file per image under `out`, at conf `PRED_CONF`, numbered as the set's
    annotation files (`categories`). Boxes without area (x2 <= x1 or y2 <= y1, which YOLO26n's NMS-free head
    can give an untrained model) are left out, as no evaluator takes them; returns how many were."""
    run = detector(row, weights, imgsz, PRED_CONF)
    category = categories(row)
    out.mkdir(parents=True, exist_ok=True)
    dropped = 0
    for path in images:
        boxes, scores, names = run(read_image(path))
        lines = [f"{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{s:.5f},{category[n]},-1,-1"
                 for (x1, y1, x2, y2), s, n in zip(boxes.tolist(), scores.tolist(), names, strict=True)
                 if x2 > x1 and y2 > y1]  # fmt: skip
        dropped += len(names) - len(lines)
        (out / f"{path.stem}.txt").write_text("".join(line + "\n" for line in lines))
    return dropped


def inference_ms(trained: dict[str, dict], images: list[Path], imgsz: int, rounds: int) -> dict[str, float]:
    """Median milliseconds per image of each model at conf `TIMED_CONF`, one image at a time, after
    `WARMUP_IMAGES` warm-up calls (at conf 0.001 an early model's thousands of candidate boxes would time NMS, not
    the model). The models take turns image by image, `rounds` times over the images, so that a machine whose
    load changes slows all of them alike."""
    runners = {row: detector(row, result["weights"], imgsz, TIMED_CONF) for row, result in trained.items()}
    loaded = [read_image(path) for path in images]
    for run in runners.values():
        for image in loaded[:WARMUP_IMAGES]:
            run(image)
    times: dict[str, list[float]] = {row: [] for row in runners}
    for _ in range(rounds):
        for image in loaded:
            for row, run in runners.items():
                start = time.perf_counter()
                run(image)
                times[row].append(time.perf_counter() - start)
    return {row: 1000 * statistics.median(values) for row, values in times.items()}


def common_scores(annotations: Path, images: Path, predictions: Path, report: Path) -> dict[str, float]:
    """COCO mAP50 and mAP50-95 (fractions) of VisDrone result files, by `tphyolo eval`."""
    from tphyolo.cli import main

    code = main(["eval", "--gt", str(annotations), "--images", str(images), "--pred", str(predictions),
                 "--protocol", "coco", "--json", str(report)])  # fmt: skip
    if code != 0:
        raise RuntimeError(f"tphyolo eval exited with {code} on {predictions}")
    numbers = json.loads(report.read_text())  # percent
    return {"map50": numbers["AP50"] / 100, "map": numbers["AP"] / 100}


STEP_MODELS = {"tphyolo tph-yolov5n": "tph-yolov5n", "ultralytics YOLO11n": "yolo11n.yaml",
               "ultralytics YOLO26n": "yolo26n.yaml"}  # fmt: skip
STEP_CLASSES = 10
PROFILE_TOP = 16  # operators in the --profile table
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile")


def default_image() -> Path | None:
    """The first VisDrone image under $TPHYOLO_SHARED/data/visdrone-mini/images, if there is one."""
    folder = Path(os.environ.get("TPHYOLO_SHARED", "")) / "data" / "visdrone-mini" / "images"
    images = sorted(folder.glob("*.jpg")) if folder.is_dir() else []
    return images[0] if images else None


def cpu_flags() -> list[str]:
    """The ISA flags of `ISA_FLAGS` this CPU reports in /proc/cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    reported = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return [flag for flag in ISA_FLAGS if flag in reported]


def step_model(row: str, imgsz: int = 320):
    """(model, loss function preds -> scalar, whether its trainer computes the loss under autocast), random
    weights, `STEP_CLASSES` classes; tphyolo's loss hyperparameters are scaled to `imgsz`."""
    import torch

    spec = STEP_MODELS[row]
    torch.manual_seed(0)
    if spec.endswith(".yaml"):
        from ultralytics.cfg import get_cfg
        from ultralytics.nn.tasks import DetectionModel

        model = DetectionModel(spec, nc=STEP_CLASSES, verbose=False)
        model.args = get_cfg()  # the default hyperparameters its trainer gives the loss
        return model, lambda preds, batch: model.loss(batch, preds)[0].sum(), True
    from tphyolo.models.build import build_model
    from tphyolo.training.hyp import load_hyp, scale_hyp
    from tphyolo.training.loss import YoloLoss

    model = build_model(spec, num_classes=STEP_CLASSES)
    head = model.head
    hyp = scale_hyp(load_hyp("scratch-low"), num_levels=head.nl, num_classes=head.nc, imgsz=imgsz)
    loss = YoloLoss.from_model(model, hyp)
    return model, lambda preds, batch: loss(preds, batch["targets"])[0], False


def step_batch(batch: int, imgsz: int) -> dict:
    """Images in [0, 1] and the same 20 boxes per image in both tools' target formats."""
    import torch

    from tphyolo.bench.model import synthetic_targets

    targets = synthetic_targets(batch, STEP_CLASSES)  # (n, 6): image, class, cx, cy, w, h (normalised)
    images = torch.rand(batch, 3, imgsz, imgsz, generator=torch.Generator().manual_seed(0))
    return {"img": images, "targets": targets, "batch_idx": targets[:, 0], "cls": targets[:, 1:2],
            "bboxes": targets[:, 2:6]}  # fmt: skip


def interleaved(calls: dict, repeats: int) -> dict[str, float]:
    """Median milliseconds of each call, one warm-up each, then `repeats` rounds in turn."""
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {row: [] for row in calls}
    for _ in range(repeats):
        for row, call in calls.items():
            start = time.perf_counter()
            call()
            times[row].append(time.perf_counter() - start)
    return {row: 1000 * statistics.median(values) for row, values in times.items()}


def train_calls(layout: str, bf16: bool, batch: dict) -> dict:
    """row -> one train step of that model in `layout` ("nchw" or "nhwc"), fp32 or under bf16 autocast."""
    import torch

    memory_format = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    images = batch["img"].contiguous(memory_format=memory_format)
    calls = {}
    for row in STEP_MODELS:
        model, loss_fn, loss_in_autocast = step_model(row, images.shape[-1])
        model = model.train().to(memory_format=memory_format)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)

        def step(model=model, loss_fn=loss_fn, inside=loss_in_autocast, optimizer=optimizer) -> None:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                preds = model(images)
                loss = loss_fn(preds, batch) if inside else None
            loss = loss_fn(preds, batch) if loss is None else loss
            loss.backward()
            optimizer.step()

        calls[row] = step
    return calls


def infer_calls(layout: str, imgsz: int) -> dict:
    """row -> one fused eval forward of that model at batch 1, `imgsz` px, in `layout`."""
    import torch

    memory_format = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    images = torch.rand(1, 3, imgsz, imgsz).contiguous(memory_format=memory_format)
    calls = {}
    for row in STEP_MODELS:
        model = step_model(row)[0].eval()
        model = (model.fuse(verbose=False) if STEP_MODELS[row].endswith(".yaml") else model.fuse()).eval()
        model = model.to(memory_format=memory_format)

        def forward(model=model) -> None:
            with torch.inference_mode():
                model(images)

        calls[row] = forward
    return calls


def predict_calls(weights: Path, image_path: Path) -> dict:
    """row -> one call of that tool's default Python predictor on the image (BGR array), 640 px, on the CPU."""
    from ultralytics import YOLO

    from tphyolo.predict.predictor import Predictor

    image = read_image(image_path)
    calls = {}
    for row, spec in STEP_MODELS.items():
        if spec.endswith(".yaml"):
            model = YOLO(spec)
            calls[row] = lambda model=model: model.predict(image, imgsz=640, device="cpu", verbose=False)
        else:
            predictor = Predictor(weights, imgsz=640, device="cpu")
            calls[row] = lambda predictor=predictor: predictor(image)
    return calls


def ratio_line(what: str, ms: dict[str, float]) -> str:
    ours = ms["tphyolo tph-yolov5n"]
    others = [(row.split()[-1], value) for row, value in ms.items() if not row.startswith("tphyolo")]
    parts = " | ".join(f"{name} {value:.1f} ms, ratio {ours / value:.2f}x" for name, value in others)
    return f"| {what} | {ours:.1f} ms | {parts} |"


def run_steps(args) -> dict:
    """The `--steps` measurements (see the module docstring); prints one table row per measurement."""
    flags = cpu_flags()
    bf16 = "avx512_bf16" in flags or "amx_bf16" in flags
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; ISA flags: {' '.join(flags) or 'none found'}; "
          f"threads {args.threads}; load before {os.getloadavg()[0]:.1f}\n")  # fmt: skip
    print("| what | tph-yolov5n | ultralytics: ms, tphyolo / it |")
    print("|---|---|---|")
    results: dict[str, dict[str, float]] = {}
    batch = step_batch(args.batch, args.img)
    for layout in ("nchw", "nhwc"):
        for precision in ("fp32", "bf16") if bf16 else ("fp32",):
            what = f"train step, {args.img} px, batch {args.batch}, {layout.upper()} {precision}"
            results[what] = interleaved(train_calls(layout, precision == "bf16", batch), args.repeats)
            print(ratio_line(what, results[what]), flush=True)
    for imgsz in (320, 640):
        for layout in ("nchw", "nhwc"):
            what = f"fused inference, {imgsz} px, batch 1, {layout.upper()} fp32"
            results[what] = interleaved(infer_calls(layout, imgsz), 3 * args.repeats)
            print(ratio_line(what, results[what]), flush=True)
    if args.weights is not None and args.image is None:
        print("predict row skipped: no --image, and no VisDrone image under $TPHYOLO_SHARED/data", flush=True)
    elif args.weights is not None:
        what = f"predict per image, 640 px, {args.image.name}, each tool's defaults"
        results[what] = interleaved(predict_calls(args.weights, args.image), 3 * args.repeats)
        print(ratio_line(what, results[what]), flush=True)
    print(f"\nload after {os.getloadavg()[0]:.1f}")
    return results


def profile_train_steps(args) -> dict[str, dict[str, float]]:
    """{row: {operator: self CPU ms per step}} of the NCHW fp32 train step (`--profile`); prints the top
    `PROFILE_TOP` operators of the first row beside the others' times for the same operators."""
    from torch.profiler import ProfilerActivity, profile

    per_op: dict[str, dict[str, float]] = {}
    for row, step in train_calls("nchw", False, step_batch(args.batch, args.img)).items():
        step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.repeats):
                step()
        per_op[row] = {e.key: e.self_cpu_time_total / 1000 / args.repeats for e in prof.key_averages()}
    rows = list(per_op)
    totals = {row: sum(ops.values()) for row, ops in per_op.items()}
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; ISA flags: {' '.join(cpu_flags()) or 'none found'}; threads "
          f"{args.threads}; load {os.getloadavg()[0]:.1f}; NCHW fp32 train step, self CPU ms per step\n")  # fmt: skip
    print("| operator | " + " | ".join(row.split()[-1] for row in rows) + " |")
    print("|---" * (len(rows) + 1) + "|")
    print("| all operators | " + " | ".join(f"{totals[row]:.0f}" for row in rows) + " |")
    top = sorted(per_op[rows[0]], key=per_op[rows[0]].get, reverse=True)[:PROFILE_TOP]
    for op in top:
        print(f"| `{op}` | " + " | ".join(f"{per_op[row].get(op, 0.0):.0f}" for row in rows) + " |")
    return per_op


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=20, help="epochs of every training (README: 20)")
    parser.add_argument("--peer-epochs", type=int,
                        help="epochs of the ultralytics trainings (default: --epochs), for the time to a mAP50 "
                             "that their recipe reaches later")
    parser.add_argument("--img", type=int, default=320, help="train and predict size (README: 320)")
    parser.add_argument("--batch", type=int, default=8, help="batch of every training (README: 8)")
    parser.add_argument("--workers", type=int, default=2, help="data-loading workers of every training")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of every process")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the val images, models in turn")
    parser.add_argument("--workdir", type=Path, help="where data, runs and predictions go (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--reuse-training", action="store_true",
                        help="keep the trainings an earlier run with the same --workdir finished (its trained.json)")
    parser.add_argument("--steps", action="store_true",
                        help="measure train step, inference and predict side by side instead of training")
    parser.add_argument("--keep-freed-blocks", action="store_true",
                        help="--steps, --profile: keep freed memory blocks for reuse (tphyolo's CPU runtime setting)")
    parser.add_argument("--profile", action="store_true",
                        help="profile each model's NCHW fp32 train step by operator instead of training")
    parser.add_argument("--repeats", type=int, default=5,
                        help="--steps: rounds per train-step measurement; --profile: profiled steps")
    parser.add_argument("--weights", type=Path, help="--steps: tphyolo weights for the predict row (else skipped)")
    parser.add_argument("--image", type=Path, default=default_image(), help="--steps: the predict row's image")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    if args.steps or args.profile:
        os.environ["YOLO_OFFLINE"] = "1"
        if args.keep_freed_blocks:
            from tphyolo.runtime.cpu_memory import keep_freed_blocks

            kept = keep_freed_blocks()
            print(f"freed blocks kept for reuse: {'yes' if kept == 'tphyolo' else 'no, ' + kept}")
        with tempfile.TemporaryDirectory(prefix="tphyolo-vs-ultralytics-") as tmp:
            os.environ.setdefault("YOLO_CONFIG_DIR", tmp)  # not the user's ~/.config
            results = profile_train_steps(args) if args.profile else run_steps(args)
        if args.json:
            args.json.write_text(json.dumps({"settings": vars(args), "cpu_flags": cpu_flags(), "results": results},
                                            indent=2, default=str))  # fmt: skip
        return
    with tempfile.TemporaryDirectory(prefix="tphyolo-vs-ultralytics-") as tmp:
        work = Path(args.workdir or tmp)
        os.environ["YOLO_CONFIG_DIR"] = str(work / "ultralytics-settings")  # not the user's ~/.config
        os.environ["YOLO_OFFLINE"] = "1"
        env = dict(os.environ)
        yaml, val_images, annotations = yolo_copy(work)
        trained = train_all(args, work, yaml, env, work / "trained.json")
        images = sorted(p for p in val_images.iterdir() if p.suffix.lower() in (".jpg", ".png"))
        for row, result in trained.items():
            predictions = work / "predictions" / row.split()[-1]
            result["boxes_without_area"] = predict(row, result["weights"], images, args.img, predictions)
            result.update(common_scores(annotations, val_images, predictions, work / f"{row.split()[-1]}.json"))
        for row, ms in inference_ms(trained, images, args.img, args.rounds).items():
            trained[row]["ms_per_image"] = ms
    peer = f", ultralytics {args.peer_epochs}" if args.peer_epochs else ""
    settings = f"{args.epochs} epochs{peer}, {args.img} px, batch {args.batch}, {args.threads} threads"
    print(f"\n{time.strftime('%Y-%m-%d %H:%M')}; ISA flags: {' '.join(cpu_flags()) or 'none found'}; load after "
          f"{os.getloadavg()[0]:.1f}\n{settings}; common evaluator: tphyolo eval --protocol coco on the "
          f"{len(images)} val images, conf {PRED_CONF}; ms/image at conf {TIMED_CONF}, batch 1\n")  # fmt: skip
    print("| model | epochs | train wall s | train CPU s | first epoch s | later epochs s | own val mAP50 "
          "| COCO mAP50 | COCO mAP50-95 | ms/image |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row, r in trained.items():
        first, later = epoch_seconds(r["timeline"])
        print(f"| {row} | {r['epochs']} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} | {first:.1f} | "
              f"{'-' if later is None else f'{later:.1f}'} | {r['own_map50']:.3f} | {r['map50']:.3f} | "
              f"{r['map']:.3f} | {r['ms_per_image']:.1f} |")  # fmt: skip
    for row, r in trained.items():
        if r.get("boxes_without_area"):
            print(f"{row}: {r['boxes_without_area']} boxes without area left out of the common evaluator's input")
    print("\nseconds from the start of training to the end of the first epoch whose own val mAP50 reached it:\n")
    print("| model | " + " | ".join(f"mAP50 {mark}" for mark in MAP50_MARKS) + " |")
    print("|---" * (len(MAP50_MARKS) + 1) + "|")
    for row, r in trained.items():
        cells = [seconds_to(r["timeline"], mark) for mark in MAP50_MARKS]
        print(f"| {row} | " + " | ".join("not reached" if t is None else f"{t:.0f}" for t in cells) + " |")
    if args.json:
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json)}, "results": trained},
                                        indent=2, default=str))  # fmt: skip


if __name__ == "__main__":
    main()

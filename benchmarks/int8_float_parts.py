"""What keeping parts of a model in float costs and buys in an INT8 export: speed against the float file in the
same runtime, and agreement and mAP against the float model, for several choices at once.

    python benchmarks/int8_float_parts.py --model tph-yolov5l --img 640 --variants ov,ov-t,ov-t-head --pairs 5
    python benchmarks/int8_float_parts.py --weights best.pt --img 320 --variants ov-t-head,ort-head --map

A variant is `<runtime>[-<word>...]`: runtime `ov` (NNCF, OpenVINO) or `ort` (ONNX Runtime QDQ); `-t`
NNCF's transformer model type; `-first` NNCF's overflow fix in the first layer only (NNCF's default; tphyolo fixes
every layer: 7-bit weights, against the saturation of the 16-bit sums of CPUs without VNNI); `-ent`, `-pct` ONNX
Runtime's entropy or percentile calibration instead of min/max; `-global` NNCF's activation ranges from the smallest
min and largest max over the images (NNCF's default: the mean of each image's min and max); `-nosq` the
transformer mode without SmoothQuant (one calibration pass instead of two); each part, a name of
`tphyolo.export.int8_policy.FLOAT_PARTS` (`head` = head-convs, `attn` = attention-products), kept in float. The
model is traced once at a fixed size, batch 1, and calibrated on `--calib` images of `--data`'s train split
(letterboxed as prediction does).

Printed per variant: the seconds quantization took; the paired speedup over the float file of its runtime
(the calls of all files interleaved, which runs first rotating; medians on a shared machine are inflated, the
ratios less so); on `--val` val images, the largest box and score error on the 20 rows the float model is most
confident about; with `--map`, mAP50 / mAP50-95 of the float and INT8 files on those images (the accuracy
check of `tphyolo export --int8`, `tphyolo.export.int8_check`) and the class whose AP50 fell most.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import torch

from tphyolo.data.dataset_config import load_data_config
from tphyolo.export.calibration import calibration_batches
from tphyolo.export.int8_check import AccuracyCheck
from tphyolo.export.int8_policy import float_nodes
from tphyolo.export.onnx_file import trace_onnx
from tphyolo.export.openvino_ir import export_openvino, save_ir
from tphyolo.export.quantize_onnx import quantize_onnx, rewrite_metadata
from tphyolo.export.quantize_openvino import quantize_openvino
from tphyolo.infer.backends import load_backend
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.runtime.interleaved import time_interleaved

PART_WORDS = {"head": "head-convs", "attn": "attention-products"}
RUNTIMES = {"ov": "openvino", "ort": "onnx"}


CALIBRATION_WORDS = {"ent": "Entropy", "pct": "Percentile"}  # ONNX Runtime's range choice (default MinMax)


class Variant(NamedTuple):
    format: str
    transformer: bool  # NNCF's transformer model type
    first_only: bool  # NNCF's overflow fix in the first layer only
    parts: tuple[str, ...]  # FLOAT_PARTS kept in float
    method: str  # ONNX Runtime's calibration method
    activation_ranges: str  # NNCF's activation ranges: "global" or "mean"
    smooth_quant: bool  # SmoothQuant on matrix products in NNCF's transformer mode


def parse_variant(name: str) -> Variant:
    runtime, *words = name.split("-")
    known = (*PART_WORDS, *CALIBRATION_WORDS, "t", "first", "global", "nosq")
    if runtime not in RUNTIMES or any(w not in known for w in words):
        raise SystemExit(f"variant {name!r}: expected ov|ort followed by some of {known}")
    parts = tuple(PART_WORDS[w] for w in words if w in PART_WORDS)
    method = next((CALIBRATION_WORDS[w] for w in words if w in CALIBRATION_WORDS), "MinMax")
    ranges = "global" if "global" in words else "mean"
    return Variant(RUNTIMES[runtime], "t" in words, "first" in words, parts, method, ranges, "nosq" not in words)


def load_model(args: argparse.Namespace) -> tuple[torch.nn.Module, str]:
    torch.manual_seed(0)
    if args.weights:
        from tphyolo.checkpoint.format import load_checkpoint

        return load_checkpoint(args.weights).build_model().eval().fuse(), Path(args.weights).stem
    from tphyolo.models import build_model

    return build_model(args.model).eval().fuse(), args.model


def write(variant: str, trace: Path, model, calibration, metadata: ExportMetadata, folder: Path) -> Path:  # noqa: ANN001
    v = parse_variant(variant)
    keep = float_nodes(trace, model, v.parts)
    int8 = ExportMetadata(**{**metadata.__dict__, "format": v.format, "int8": True, "int8_float_parts": v.parts})
    if v.format == "openvino":
        quantized = quantize_openvino(trace, calibration.batches, keep_float=keep, transformer=v.transformer,
                                      overflow_fix="first_layer_only" if v.first_only else "enable",
                                      activation_ranges=v.activation_ranges, smooth_quant=v.smooth_quant)  # fmt: skip
        return save_ir(quantized, folder / f"{variant}_openvino_model", metadata=int8)
    path = quantize_onnx(trace, folder / f"{variant}.onnx", calibration.batches, keep_float=keep,
                         calibrate_method=v.method)  # fmt: skip
    rewrite_metadata(path, int8)
    return path


def float_files(trace: Path, metadata: ExportMetadata, folder: Path) -> dict[str, Path]:
    onnx_path = folder / "float.onnx"
    onnx_path.write_bytes(trace.read_bytes())
    rewrite_metadata(onnx_path, ExportMetadata(**{**metadata.__dict__, "format": "onnx"}))
    ov_meta = ExportMetadata(**{**metadata.__dict__, "format": "openvino"})
    return {"onnx": onnx_path, "openvino": export_openvino(trace, folder / "float_openvino_model", metadata=ov_meta)}


def agreement(int8, reference: list[torch.Tensor], images: list) -> tuple[float, float]:  # noqa: ANN001
    """Largest box (pixels) and score error on the 20 most confident rows of each reference output."""
    boxes, scores = 0.0, 0.0
    for x, ref in zip(images, reference, strict=True):
        out = int8.run(int8.prepare(torch.from_numpy(x)))[0]
        ref_score = ref[:, 4] * ref[:, 5:].max(1).values
        rows = ref_score.topk(20).indices
        boxes = max(boxes, float((out[rows, :4] - ref[rows, :4]).abs().max()))
        out_score = out[rows, 4] * out[rows, 5:].max(1).values
        scores = max(scores, float((out_score - ref_score[rows]).abs().max()))
    return boxes, scores


def paired(runs: dict[str, callable], pairs: int) -> dict[str, list[float]]:
    """Seconds per call of each of `runs`, interleaved, after two untimed calls each."""
    return dict(zip(runs, time_interleaved(list(runs.values()), warmup=2, rounds=pairs), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tph-yolov5n", help="built-in model (random weights, seed 0)")
    parser.add_argument("--weights", help="a checkpoint instead of --model")
    parser.add_argument("--img", type=int, default=320)
    parser.add_argument("--data", default="synthetic")
    parser.add_argument("--calib", type=int, default=64, help="calibration images")
    parser.add_argument("--val", type=int, default=8, help="val images for agreement (and --map)")
    parser.add_argument("--variants", default="ov-t-head,ort-head")
    parser.add_argument("--pairs", type=int, default=5, help="timed rounds (0: no timing)")
    parser.add_argument("--map", action="store_true", help="also score float and INT8 files (mAP) on --val images")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    model, name = load_model(args)
    stride = int(model.stride.max())
    data = load_data_config(args.data)
    metadata = ExportMetadata(format="onnx", model=name, names=tuple(model.names), stride=stride,
                              imgsz=(args.img, args.img), batch=1, dynamic=False)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="int8-parts-") as tmp:
        folder = Path(tmp)
        trace = trace_onnx(model, torch.rand(1, 3, args.img, args.img), folder / "trace.onnx", dynamic=False, opset=17)
        calibration = calibration_batches(data, count=args.calib, imgsz=args.img, stride=stride, dynamic=False)
        val_images = calibration_batches(data, split="val", count=args.val, imgsz=args.img, stride=stride,
                                         dynamic=False).batches  # fmt: skip
        with torch.no_grad():
            reference = [model(torch.from_numpy(x).float() / 255)[0] for x in val_images]
        floats = float_files(trace, metadata, folder)
        files = {f"float-{fmt}": path for fmt, path in floats.items()}
        variants = []
        for variant in args.variants.split(","):
            start = time.perf_counter()
            try:
                files[variant] = write(variant, trace, model, calibration, metadata, folder)
            except ValueError as error:  # e.g. ONNX Runtime's histogram of an activation with no spread
                print(f"{variant}: quantization failed: {error}")
                continue
            variants.append(variant)
            print(f"{variant}: quantized in {time.perf_counter() - start:.1f} s on {calibration.images} images")
        backends = {key: load_backend(path, threads=args.threads) for key, path in files.items()}
        for variant in variants:
            boxes, scores = agreement(backends[variant], reference, val_images)
            print(f"{variant}: top-20 rows vs PyTorch: box error <= {boxes:.2f} px, score error <= {scores:.3f}")
        if args.pairs:
            x = backends["float-onnx"].prepare(torch.from_numpy(val_images[0]))
            times = paired({key: (lambda b=b: b.run(x)) for key, b in backends.items()}, args.pairs)
            for key, spent in times.items():
                fmt = "onnx" if key.startswith(("ort", "float-onnx")) else "openvino"
                ratios = [a / b for a, b in zip(times[f"float-{fmt}"], spent, strict=True)]
                print(f"{key:24s} median {1e3 * statistics.median(spent):8.1f} ms; "
                      f"float {fmt} / this, paired: {statistics.median(ratios):.2f}x")  # fmt: skip
        if args.map:
            for variant in variants:
                fmt = parse_variant(variant).format
                check = AccuracyCheck(floats[fmt], data, count=args.val, protocol="yolo", max_drop=1.0, progress=False)
                accuracy, _ = check(files[variant])
                print(f"{variant}: {accuracy.summary()}")


if __name__ == "__main__":
    main()

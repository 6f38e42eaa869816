"""What the default CPU runtime buys: `tphyolo.Predictor` on a checkpoint, OpenVINO (compiled, f32) against
`backend="pytorch"`, on one real drone image; and what the compile costs, first run against warm start.

    python benchmarks/compiled_runtime.py --weights best.pt --model tph-yolov5l --img 640 --repeats 5

For each checkpoint (`--weights`, and a randomly initialised `--model` saved as one): the cache is emptied, a
Predictor is made and run once (the first run: trace, convert, parity check, compile), then made and run again
(the warm start: the cached IR loaded and compiled); then per-image times of the two runtimes, interleaved
(A B A B ...), after one warm-up call each. Prints medians, ratios, `uptime` and the CPU flags that decide
OpenVINO's precision. Cache: a temporary folder (`TPHYOLO_MODEL_CACHE`), removed at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import cv2
import torch

from tphyolo.checkpoint.format import save_checkpoint
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.infer.backends.compiled import CACHE_ENV
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor
from tphyolo.runtime.interleaved import time_interleaved

IMAGE = Path(os.environ.get("TPHYOLO_SHARED", "../shared")) / "data/visdrone-mini/images/0000001_02999_d_0000005.jpg"


def timed(call):
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


def random_checkpoint(model: str, folder: Path) -> Path:
    torch.manual_seed(0)
    net = build_model(model, names=NAMES).eval()
    payload = {"model": net.state_dict(), "model_yaml": net.yaml, "names": list(NAMES), "nc": len(NAMES)}
    return save_checkpoint(folder / f"{model}-random.pt", payload)


def measure(weights: Path, image, *, imgsz: int, repeats: int, cache: Path) -> dict[str, float]:
    for entry in cache.glob("*"):
        subprocess.run(["rm", "-rf", str(entry)], check=True)
    first, predictor = timed(lambda: Predictor(str(weights), imgsz=imgsz, device="cpu"))
    first += timed(lambda: predictor(image))[0]
    warm, predictor = timed(lambda: Predictor(str(weights), imgsz=imgsz, device="cpu"))
    warm += timed(lambda: predictor(image))[0]
    verdict = next(cache.glob("*/check.json")).read_text()
    eager = Predictor(str(weights), imgsz=imgsz, device="cpu", backend="pytorch")
    eager(image)
    runs = time_interleaved((lambda: predictor(image), lambda: eager(image)), warmup=0, rounds=repeats)
    times = dict(zip(("openvino", "pytorch"), runs, strict=True))
    ov, pt = (statistics.median(times[k]) for k in ("openvino", "pytorch"))
    paired = statistics.median(p / o for p, o in zip(times["pytorch"], times["openvino"], strict=True))
    print(f"{weights.name}: first run {first:.1f} s, warm start {warm:.1f} s ({first / warm:.1f}x); check {verdict}")
    print(f"{weights.name}: per image OpenVINO f32 {ov * 1e3:.0f} ms, PyTorch {pt * 1e3:.0f} ms: "
          f"{pt / ov:.2f}x (paired {paired:.2f}x), {repeats} rounds")  # fmt: skip
    return {"first": first, "warm": warm, "openvino": ov, "pytorch": pt}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, action="append", default=[], help="checkpoints (repeatable)")
    parser.add_argument("--model", default="tph-yolov5l", help="a random model of this yaml too ('' for none)")
    parser.add_argument("--img", type=int, default=640)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    image = cv2.imread(str(IMAGE))
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text().split("flags", 2)[1].split("\n")[0] if cpuinfo.exists() else ""
    print("bf16/AMX flags:", " ".join(f for f in flags.split() if "bf16" in f or "amx" in f or f == "avx512f"))
    print(f"torch threads {torch.get_num_threads()}, image {IMAGE.name} {image.shape[1]}x{image.shape[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[CACHE_ENV] = str(Path(tmp) / "cache")
        (Path(tmp) / "cache").mkdir()
        weights = list(args.weights) + ([random_checkpoint(args.model, Path(tmp))] if args.model else [])
        for path in weights:
            measure(path, image, imgsz=args.img, repeats=args.repeats, cache=Path(tmp) / "cache")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()

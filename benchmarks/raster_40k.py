"""A 40,000 px orthomosaic, generated: peak memory, tiles per second, reading vs inference, NoData skipping.

    PYTHONPATH=src python benchmarks/raster_40k.py --side 40000 --content 2560

Writes a `--side` x `--side` RGB GeoTIFF (EPSG:32633, 0.5 m pixels; tiled, deflate, sparse) that is NoData but
for a `--content` px square of built-in synthetic scenes, then predicts it tile by tile (`predict_raster`, 640 px
tiles, overlap 0.2, an untrained `--model`: the network's cost is real, its detections are not the point) in
this process. Prints the peak resident memory of the process (the decoded raster would be side^2 x 3 bytes),
tiles run per second, the share of the run spent reading tiles (NoData tests included) and in inference, and
the time skipping NoData saved: the tiles skipped times the measured inference time per tile run, less the
time the NoData tests took -- a projection, since running the 6,000 empty tiles is what it avoids.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
import rasterio.windows
import torch

from tphyolo.data.builtin.synthetic import render_scene
from tphyolo.infer.slicing import SliceConfig
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.raster import predict_raster


def write_raster(path: Path, side: int, content: int) -> Path:
    """The sparse GeoTIFF of the module docstring; the content square starts at side / 2."""
    rng = np.random.default_rng(0)
    start = side // 2
    profile = {"driver": "GTiff", "width": side, "height": side, "count": 3, "dtype": "uint8", "nodata": 0,
               "crs": "EPSG:32633", "transform": rasterio.Affine(0.5, 0, 500000, 0, -0.5, 4500000), "tiled": True,
               "blockxsize": 512, "blockysize": 512, "compress": "deflate", "sparse_ok": True, "bigtiff": "yes"}
    with rasterio.open(path, "w", **profile) as dst:
        for y in range(0, content, 640):
            for x in range(0, content, 640):
                size = min(640, content - x, content - y)
                image, _, _ = render_scene(rng, 640)
                rgb = np.maximum(image[:size, :size, ::-1].transpose(2, 0, 1), 1)  # 0 is NoData
                dst.write(rgb, window=rasterio.windows.Window(start + x, start + y, size, size))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=40_000)
    parser.add_argument("--content", type=int, default=2560)
    parser.add_argument("--model", default="tph-yolov5n")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    predictor = Predictor(build_model(args.model, num_classes=6).eval(), imgsz=640, conf=0.001, device="cpu",
                          batch=args.batch, merge="greedy-nmm", match="ios")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        path = write_raster(Path(folder) / "ortho.tif", args.side, args.content)
        written = time.perf_counter() - start
        start = time.perf_counter()
        run = predict_raster(predictor, path, slicing=SliceConfig(640, 0.2))
        total = time.perf_counter() - start
        size = path.stat().st_size
    ran = run.tiles - run.skipped
    per_tile = run.infer_seconds / max(ran, 1)
    numbers = {
        "raster": f"{args.side}x{args.side} RGB ({args.side**2 * 3 / 1e9:.1f} GB decoded, {size / 1e6:.1f} MB file, "
                  f"written in {written:.1f} s)",
        "peak RSS GiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
        "tiles": run.tiles, "tiles run": ran, "tiles skipped (NoData)": run.skipped, "seconds": total,
        "tiles/s (all)": run.tiles / total, "tiles/s (run)": ran / total,
        "share reading (incl. NoData tests)": run.read_seconds / total, "share inference": run.infer_seconds / total,
        "share merging": run.merge_seconds / total, "inference s per tile run": per_tile,
        "NoData skipping saved s (projected)": run.skipped * per_tile - run.read_seconds,
        "detections": len(run.detections),
    }  # fmt: skip
    for key, value in numbers.items():
        print(f"- {key}: {value:.4g}" if isinstance(value, float) else f"- {key}: {value}")
    if args.json is not None:
        args.json.write_text(json.dumps(numbers, indent=2))


if __name__ == "__main__":
    main()

"""The memory rank 0's merge of a raster's rows takes as the mosaic grows: every row's raw detections are merged
at once (`tphyolo.predict.raster`), with a random-weight model at conf 0.001 making as many raw detections as it
can (max_det per tile, all over the raster).

    PYTHONPATH=src python benchmarks/raster_merge_memory.py --sides 768 1536 2304

For each side, in a process of its own: a side x side RGB GeoTIFF of random pixels (no NoData: every tile runs)
is predicted tile by tile (`predict_raster`, 256 px tiles at overlap 0.2, an untrained yolov5n at imgsz 256,
conf 0.001, with a run folder so that the raw rows are journaled); then, in a fresh process whose peak resident
memory is reset first (Linux: /proc/self/clear_refs), the raw rows read back from the journal are merged again
as the run merges them, so that the merge's own peak above the memory held before it is measured (and its
result checked against the run's). Prints one line per side: tiles, raw and merged detections, the raw rows'
bytes, the run's peak RSS, the merge's extra peak and its seconds.

Merging the rows as they come instead (each group of overlapping boxes merged once no later row can reach it,
which gives what the merge of all at once gives) does not help here: at this threshold the overlapping boxes
chain across every row (at 768 px, 5,979 boxes in two groups, one per class, each spanning the whole height), so
no group is complete before the last row; measured, it took more memory and time than the merge of all at once.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import rasterio
import torch

from tphyolo.infer.merge import merge_detections
from tphyolo.infer.slicing import SliceConfig
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.raster import RasterRead, RowRecord, predict_raster, raster_tiles, row_unit, tile_rows
from tphyolo.predict.runner.journal import finished_records

TILE = 256


def memory_kib(field: str) -> int:
    """A field of /proc/self/status (VmRSS: resident now; VmHWM: its peak), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def write_raster(path: Path, side: int) -> Path:
    rng = np.random.default_rng(0)
    with rasterio.open(path, "w", driver="GTiff", width=side, height=side, count=3, dtype="uint8",
                       crs="EPSG:32633", transform=rasterio.Affine(0.5, 0, 500000, 0, -0.5, 4500000),
                       tiled=True, blockxsize=256, blockysize=256) as dst:  # fmt: skip
        dst.write(rng.integers(1, 256, (3, side, side), dtype=np.uint8))
    return path


def predict(side: int, merge: str, out: Path) -> dict:
    """Predict the raster of `side` px; save each row's raw detections and top y to `out` (torch.save)."""
    torch.manual_seed(0)
    predictor = Predictor(build_model("yolov5n", num_classes=2).eval(), imgsz=TILE, conf=0.001, device="cpu",
                          batch=8, merge=merge, match="ios")  # fmt: skip
    slicing = SliceConfig(TILE, 0.2)
    with tempfile.TemporaryDirectory() as folder:
        path = write_raster(Path(folder) / "ortho.tif", side)
        run = predict_raster(predictor, path, slicing=slicing, run_dir=Path(folder))
        run_peak = memory_kib("VmHWM")
        read = partial(RowRecord.from_json, classes=2)
        journaled = {r.row: r.rows for r in finished_records(Path(folder), read=read)}
        with RasterRead().open(path) as raster:
            rows = tile_rows(raster_tiles(raster, slicing))
    found = [journaled[row_unit(path, row)] for row in rows]
    settings = {"method": merge, "iou": predictor.config.merge_threshold, "match": "ios", "agnostic": False,
                "width": side, "height": side}  # fmt: skip
    torch.save({"found": found, "settings": settings, "merged": run.detections.rows()}, out)
    raw = sum(len(f) for f in found)
    return {"side": side, "tiles": run.tiles, "raw": raw, "merged": len(run.detections), "raw_MiB": raw * 24 / 2**20,
            "run_peak_MiB": run_peak / 1024}  # fmt: skip


def merged(saved: Path) -> dict:
    """Merge the rows saved at `saved` at once, in this fresh process: the merge's peak above what the process
    held before it, its seconds, and whether it gives what the run gave."""
    data = torch.load(saved)
    found, settings = data["found"], data["settings"]
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # the peak resident memory starts again from now
    before = memory_kib("VmRSS")
    start = time.perf_counter()
    result = merge_detections([torch.cat(found)], max_det=sum(len(f) for f in found), **settings)
    seconds = time.perf_counter() - start
    return {"MiB": (memory_kib("VmHWM") - before) / 1024, "s": seconds, "same": torch.equal(result, data["merged"])}


def child(*args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", type=int, nargs="+", default=[768, 1536, 2304])
    parser.add_argument("--merge", default="greedy-nmm", choices=("greedy-nmm", "nmm", "nms"))
    parser.add_argument("--predict", nargs=2, metavar=("SIDE", "OUT"), help=argparse.SUPPRESS)  # a child's work
    parser.add_argument("--merged", metavar="SAVED", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.predict is not None:
        print(json.dumps(predict(int(args.predict[0]), args.merge, Path(args.predict[1]))))
        return
    if args.merged is not None:
        print(json.dumps(merged(Path(args.merged))))
        return
    with tempfile.TemporaryDirectory() as folder:
        for side in args.sides:
            saved = str(Path(folder) / f"{side}.pt")
            n = child("--predict", str(side), saved, "--merge", args.merge)
            once = child("--merged", saved)
            print(f"{n['side']:>6} px: {n['tiles']:>4} tiles, {n['raw']:>7} raw -> {n['merged']:>6} merged "
                  f"({n['raw_MiB']:.1f} MiB of rows); run peak RSS {n['run_peak_MiB']:.0f} MiB; merge "
                  f"+{once['MiB']:.1f} MiB in {once['s']:.2f} s; as the run: {once['same']}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""A 40,000 x 40,000 RGB raster (4.8 GB decoded) runs tile by tile in bounded memory, in a process of its own."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_RSS = 2 * 1024**3  # bytes
SCRIPT = """
import json, resource, sys
import rasterio.windows  # noqa: F401
from tests.infer.block_finder import BlockFinder
from tests.predict.geotiffs import write_sparse_geotiff
from tphyolo.infer.slicing import SliceConfig
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.raster import predict_raster

path = write_sparse_geotiff(sys.argv[1], side=40_000, content=(20_000, 20_000, 3000),
                            blocks=[(20_500, 20_500, 20_700, 20_600, 0), (22_100, 21_000, 22_300, 21_400, 1)])
from tphyolo.runtime.config import RuntimeConfig
runtime = RuntimeConfig(channels_last=True)  # the layout given: the probe's one-time timing is not the raster's
predictor = Predictor(BlockFinder(), imgsz=2048, conf=0.1, runtime=runtime, device="cpu", batch=2,
                      merge="greedy-nmm", match="ios")
run = predict_raster(predictor, path, slicing=SliceConfig(2048, 0.2))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"rss": rss, "tiles": run.tiles, "skipped": run.skipped,
                  "boxes": sorted(run.detections.boxes.round().int().tolist())}))
"""


@pytest.mark.slow  # ~30 s: 625 NoData tests of 2048 px tiles
def test_a_40k_mostly_nodata_raster_stays_under_2_gib(tmp_path):
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'src'}", "OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "big.tif")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["boxes"] == [[20500, 20500, 20700, 20600], [22100, 21000, 22300, 21400]]
    starts = [min(k * 1638, 40_000 - 2048) for k in range(25)]  # 2048 px tiles, step round(2048 * 0.8)
    over_content = sum(s < 23_000 and s + 2048 > 20_000 for s in starts)  # the content spans 20,000..23,000
    assert result["tiles"] == 25 * 25 and result["tiles"] - result["skipped"] == over_content**2
    assert result["rss"] < MAX_RSS, f"peak RSS {result['rss'] / 1024**3:.2f} GiB"
    assert (tmp_path / "big.tif").stat().st_size < 50 * 1024**2

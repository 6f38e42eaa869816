"""Loader workers beside a compiled runtime: `val` on OpenVINO with two loader processes, five times in one
process while another process keeps a core busy, ends every time with the same numbers. Workers forked from a
process whose OpenVINO thread pool held a lock waited for it forever (seen beside a busy suite, not alone);
they now start from a fork server (`tphyolo.data.loader.worker_context`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.reliability.corpus import write_dataset

pytestmark = pytest.mark.slow
RUNS = 5
LIMIT_S = 300  # a hang is forever; a run at a load average of 18 on 2 cores took 91 s

# Runs `val` RUNS times in one process (each run's loader starts its workers after OpenVINO's threads run) and
# prints each run's mAPs and detections as JSON.
_VAL_RUNS = f"""
import json, sys
import tphyolo

def main():
    weights, data = sys.argv[1:3]
    runs = []
    for _ in range({RUNS}):
        r = tphyolo.val(weights, data, imgsz=64, workers=2, backend="openvino", keep_images=True, progress=False,
                        scan_cache=False)
        runs.append([r.map50, r.map, [image.detections.tolist() for image in r.image_results]])
    print(json.dumps({{"openvino": "openvino" in sys.modules, "runs": runs}}))

if __name__ == "__main__":
    main()
"""

# Keeps one core busy for at most LIMIT_S seconds (killed when the test ends).
_BUSY = f"import time\nend = time.monotonic() + {LIMIT_S}\nwhile time.monotonic() < end:\n    pass\n"


def test_val_with_loader_workers_beside_openvino_ends_with_the_same_numbers(weights, tmp_path):
    pytest.importorskip("openvino")
    write_dataset(tmp_path / "data", good=6)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = os.environ | {"PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    busy = subprocess.Popen([sys.executable, "-c", _BUSY])
    try:
        done = subprocess.run([sys.executable, "-c", _VAL_RUNS, str(weights), str(tmp_path / "data" / "data.yaml")],
                              env=env, capture_output=True, text=True, timeout=LIMIT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"val with loader workers beside OpenVINO did not end in {LIMIT_S} s")
    finally:
        busy.kill()
        busy.wait()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["openvino"] and len(result["runs"]) == RUNS
    assert any(detections for detections in result["runs"][0][2]), "the untrained model detects something"
    assert all(run == result["runs"][0] for run in result["runs"])

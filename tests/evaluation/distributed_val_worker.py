"""Run by test_distributed_eval.py, under torchrun or in one process: `tphyolo.val` of a NoisyOracle on DATA with
every output, for each protocol; rank 0 writes what it printed and scored to OUT/PROTOCOL.json. Not a test
module."""

import json
import sys
from pathlib import Path

from tests.evaluation.noisy_oracle import NoisyOracle

import tphyolo
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.loader import build_dataloader, build_dataset
from tphyolo.evaluation.loop import format_results, results_json
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.distributed import DistContext

IMGSZ, BATCH = 320, 2


def main(data: str, out: str) -> None:
    config = load_data_config(data)
    dataset, _ = build_dataset(config, "val", imgsz=IMGSZ, rect=True, batch_size=BATCH, stride=32)
    oracle = NoisyOracle(build_dataloader(dataset, batch_size=BATCH), config.names)
    for protocol in ("yolo", "visdrone"):
        run = Path(out) / protocol
        results = tphyolo.val(oracle, data, imgsz=IMGSZ, batch=BATCH, runtime=RuntimeConfig(device="cpu"),
                              workers=0, protocol=protocol, save_dir=lambda run=run: run, save_json=True,
                              save_txt=True, plots=True, progress=True)  # fmt: skip
        if DistContext.from_env().is_main:
            table = format_results(results, verbose=True).rsplit("\nSpeed:", 1)[0]
            numbers = results_json(results) | {"table": table, "images": results.images}
            (Path(out) / f"{protocol}.json").write_text(json.dumps(numbers))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

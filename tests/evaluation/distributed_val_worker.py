"""Run by test_distributed_eval.py, under torchrun or in one process, with DATA OUT WEIGHTS GT PRED:

1. `tphyolo.val` of a NoisyOracle on DATA with every output, for each protocol; rank 0 writes what it printed and
   scored to OUT/PROTOCOL.json;
2. `tphyolo eval --gt GT --pred PRED` (model-free VisDrone scoring) and `tphyolo val --weights WEIGHTS` with every
   output into OUT/val, as the command line runs them; each rank writes its exit code and what it printed to
   OUT/COMMAND.rankR.out.

One torchrun start for the three, since starting the processes is most of what each costs. Not a test module."""

import contextlib
import io
import json
import sys
from pathlib import Path

from tests.evaluation.noisy_oracle import NoisyOracle

import tphyolo
from tphyolo.cli import main as cli_main
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.loader import DatasetSettings, LoaderSettings, build_dataloader, build_dataset
from tphyolo.evaluation.results import format_results, results_json
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.distributed import DistContext

IMGSZ, BATCH = 320, 2
VAL_FLAGS = ("--img", "128", "--batch", "2", "--device", "cpu", "--workers", "0", "--save-json", "--save-txt",
             "--plots", "--report")  # fmt: skip


def run_command(argv: list[str], out: Path, name: str) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli_main(argv)
    (out / f"{name}.rank{DistContext.from_env().rank}.out").write_text(f"{code}\n{printed.getvalue()}")


def main(data: str, out: str, weights: str, gt: str, pred: str) -> None:
    config = load_data_config(data)
    dataset, _ = build_dataset(config, "val", DatasetSettings(imgsz=IMGSZ, rect=True, batch_size=BATCH, stride=32))
    oracle = NoisyOracle(build_dataloader(dataset, LoaderSettings(batch_size=BATCH)), config.names)
    for protocol in ("yolo", "visdrone"):
        run = Path(out) / protocol
        results = tphyolo.val(oracle, data, imgsz=IMGSZ, batch=BATCH, runtime=RuntimeConfig(device="cpu"),
                              workers=0, protocol=protocol, save_dir=lambda run=run: run, save_json=True,
                              save_txt=True, plots=True, progress=True)  # fmt: skip
        if DistContext.from_env().is_main:
            table = format_results(results, verbose=True).rsplit("\nSpeed:", 1)[0]
            numbers = results_json(results) | {"table": table, "images": results.images}
            (Path(out) / f"{protocol}.json").write_text(json.dumps(numbers))
    run_command(["eval", "--gt", gt, "--pred", pred, "--protocol", "visdrone", "--json", f"{out}/eval.json"],
                Path(out), "eval")  # fmt: skip
    run_command(["val", "--weights", weights, "--data", data, *VAL_FLAGS, "--project", out, "--name", "val",
                 "--json", f"{out}/val.json"], Path(out), "val")  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:6])

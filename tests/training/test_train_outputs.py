"""What a run leaves behind: validation losses, stripped final checkpoints, the final per-class validation,
results.png of an interrupted run, and the resume line."""

import logging
from pathlib import Path

import pytest
import torch
import yaml
from tests.helpers import BLOCKS_SIZE, write_blocks

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.cli import main
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.loader import DatasetSettings, LoaderSettings, build_dataloader, build_dataset
from tphyolo.evaluation.loop import evaluate
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.hyp import load_hyp, scale_hyp
from tphyolo.training.log import read_results
from tphyolo.training.loss import YoloLoss
from tphyolo.training.model.setup import build_model_for_training
from tphyolo.training.optim.optimization import warmup_plan
from tphyolo.training.trainer import Trainer
from tphyolo.training.val_loss import ValLoss

CPU = RuntimeConfig(device="cpu")


@pytest.mark.parametrize("name", ["yolov5n", "tph-yolov5ppn"])
def test_val_loss_is_the_training_loss_of_the_eval_mode_model(tiny_synthetic, name):
    data = load_data_config(tiny_synthetic)
    dataset, _ = build_dataset(
        data, "val", DatasetSettings(imgsz=128, augment=False, rect=True, batch_size=4, stride=32)
    )
    loader = build_dataloader(dataset, LoaderSettings(batch_size=4, workers=0, shuffle=False))
    torch.manual_seed(0)
    model = build_model_for_training(name, names=data.names)
    hyp = scale_hyp(load_hyp("scratch-low"), num_levels=model.head.nl, num_classes=model.nc, imgsz=128)
    loss_fn = YoloLoss.from_model(model, hyp)
    tracker = ValLoss(model, loss_fn)
    head_runs = []
    hook = model.head.register_forward_hook(lambda *_: head_runs.append(1))
    level_runs = [0] * model.head.nl  # every output convolution runs once per batch: the loss reuses the maps
    counters = [conv.register_forward_hook(lambda *_, i=i: level_runs.__setitem__(i, level_runs[i] + 1))
                for i, conv in enumerate(model.head.output_convs())]  # fmt: skip
    evaluate(model, tracker.batches(loader), names=data.names, runtime=CPU, device=torch.device("cpu"))
    for handle in (hook, *counters):
        handle.remove()
    assert level_runs == [len(head_runs)] * model.head.nl and len(head_runs) == 1

    model.eval()
    model.head.train()  # the oracle: eval-mode features, raw maps from the head
    expected = []
    with torch.no_grad():
        for batch in loader:
            expected.append(loss_fn(model(batch.images.float() / 255), batch.targets)[1])
    assert sum(v is not None for v in tracker.items) == len(expected) == 1
    assert torch.allclose(tracker.mean(), torch.stack(expected).mean(0), rtol=1e-5)
    assert (tracker.mean() > 0).all()


def _cfg(data, tmp_path, **values) -> TrainConfig:
    settings = dict(data=str(data), imgsz=128, batch=4, workers=0, plots=False, warmup_min_steps=1,
                    project=str(tmp_path), name="run", epochs=1)  # fmt: skip
    return TrainConfig(**{**settings, **values})


@pytest.mark.slow
def test_a_finished_run_logs_val_losses_strips_its_weights_and_validates_best(
    tiny_synthetic, tmp_path, caplog, monkeypatch
):
    from tphyolo.evaluation import results as evaluate_module

    formats = evaluate_module.format_results
    tables = []

    def format_results(results, *, verbose=False):
        tables.append(verbose)
        return formats(results, verbose=verbose)

    monkeypatch.setattr(evaluate_module, "format_results", format_results)
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        result = Trainer(_cfg(tiny_synthetic, tmp_path, save_period=1), CPU).fit()
    columns = read_results(result.run_dir / "results.csv")
    for name in ("val/box_loss", "val/obj_loss", "val/cls_loss"):
        assert len(columns[name]) == 1 and 0 < columns[name][0] < 100
    full = result.run_dir / "weights" / "epoch1.pt"  # kept as written: resumable
    unstripped = load_checkpoint(full)
    assert "optimizer" in unstripped.state
    for path in (result.last, result.best):
        ckpt = load_checkpoint(path)
        assert ckpt.ema is None and not {"optimizer", "scheduler", "scaler", "rng_state"} & set(ckpt.state)
        assert ckpt.state["epoch"] == 0 and path.stat().st_size < 0.6 * full.stat().st_size
        assert all(torch.equal(v, unstripped.ema[k]) for k, v in ckpt.model.items())
    text = caplog.text
    assert f"validating {result.best}" in text
    after = text[text.index(f"validating {result.best}") :]
    assert "Class" in after and any(line.split()[:2] == ["all", "4"] for line in after.splitlines())
    assert tables == [True]  # the table with a row per class (an untrained model detects nothing: 'all' only)
    assert set(result.final_metrics) >= {"metrics/mAP50", "metrics/mAP50-95"}


@pytest.mark.slow
def test_an_interrupted_run_plots_its_results_and_resume_says_where_it_continues(
    tiny_synthetic, tmp_path, caplog, monkeypatch
):
    saves = Trainer._save

    def save_then_stop(self, epoch, improved, **kwargs):
        if epoch == 1:
            raise KeyboardInterrupt
        saves(self, epoch, improved, **kwargs)

    monkeypatch.setattr(Trainer, "_save", save_then_stop)
    trainer = Trainer(_cfg(tiny_synthetic, tmp_path, epochs=2, plots=True), CPU)
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    assert (trainer.run_dir / "results.png").is_file()
    assert "optimizer" in load_checkpoint(trainer.weights_dir / "last.pt").state  # not stripped: resumable
    monkeypatch.undo()
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        Trainer.resume(trainer.weights_dir / "last.pt", CPU)
    assert f"resuming {trainer.weights_dir / 'last.pt'} from epoch 2 of 2" in caplog.text


@pytest.mark.slow
def test_a_finished_run_writes_yolov5s_validation_figures_as_val_does(tiny_synthetic, tmp_path):
    """The final validation of best.pt leaves YOLOv5's figures in the run folder: what `val` of the same
    weights on the same split writes (the oracle), the ground-truth panel byte for byte."""
    from tphyolo.evaluation.settings import ValConfig
    from tphyolo.evaluation.val import val

    result = Trainer(_cfg(tiny_synthetic, tmp_path, plots=True), CPU).fit()
    figures = {"confusion_matrix.png", "confusion_matrix_normalized.png", "PR_curve.png", "F1_curve.png",
               "P_curve.png", "R_curve.png", "val_batch0_labels.jpg", "val_batch0_pred.jpg"}  # fmt: skip
    oracle = tmp_path / "val"
    val(str(result.best), tiny_synthetic, ValConfig(save_dir=oracle, plots=True, workers=0), imgsz=128,
        device="cpu")  # fmt: skip
    assert figures <= {p.name for p in oracle.iterdir()}  # every one, flat curves too (2 epochs find little)
    assert figures <= {p.name for p in result.run_dir.iterdir()}
    labels = "val_batch0_labels.jpg"
    assert (result.run_dir / labels).read_bytes() == (oracle / labels).read_bytes()


def test_the_warm_up_line_says_when_its_minimum_set_the_length():
    line = warmup_plan(100, 10, from_epochs=5, min_steps=100)
    assert "the first 100 batches (10.0 epochs) raise the learning rate from 0 (--warmup-min-steps 100; " \
           "warmup_epochs alone would give 5);" in line  # fmt: skip
    assert "(--warmup-min-steps 100, capped at half the run;" in warmup_plan(50, 10, from_epochs=5, min_steps=100)
    assert "--warmup-min-steps" not in warmup_plan(20, 10, from_epochs=20, min_steps=10)  # the epochs set it


def test_warmup_min_steps_is_a_flag_of_train():
    from tphyolo.cli import build_parser

    parser = build_parser(commands=["train"])
    args = parser.parse_args(["train", "--warmup-min-steps", "0"])
    assert args.warmup_min_steps == 0 and parser.parse_args(["train"]).warmup_min_steps == 100


def _all_row(text: str) -> list[str]:
    """The 'all' row of the last validation table in `text`."""
    rows = [line.split() for line in text.splitlines() if line.split()[:1] == ["all"]]
    return rows[-1]


@pytest.fixture
def blocks(tmp_path) -> Path:
    """16 block images at 64 px (`write_blocks`), the same images as train and val split: learnt in a few steps."""
    write_blocks(tmp_path / "blocks", count=16, size=BLOCKS_SIZE, seed=0)
    data = {"path": str(tmp_path), "train": "blocks/images", "val": "blocks/images", "names": {0: "red", 1: "blue"}}
    (tmp_path / "data.yaml").write_text(yaml.safe_dump(data))
    hyp = load_hyp("synthetic")
    hyp.update(lr0=0.01, lrf=0.5, warmup_epochs=0.0, weight_decay=0.0, hsv_v=0.0, translate=0.0, scale=0.0, fliplr=0.0)
    (tmp_path / "hyp.yaml").write_text(yaml.safe_dump(hyp))
    return tmp_path / "data.yaml"


@pytest.mark.slow
def test_val_of_best_with_no_flags_reproduces_the_final_validation_table(blocks, tmp_path, caplog, capsys):
    """`tphyolo val --weights best.pt --data DATA` is the oracle: the training's final table is its table, on the
    runtime, precision and batches the command takes by default (a checkpoint on the CPU: OpenVINO), and both
    run folders say what ran."""
    cfg = TrainConfig(data=str(blocks), model="yolov5n", hyp=str(blocks.parent / "hyp.yaml"), imgsz=BLOCKS_SIZE,
                      batch=16, nominal_batch=16, epochs=20, workers=0, optimizer="AdamW", plots=False,
                      warmup_min_steps=0, patience=0, project=str(tmp_path), name="run", seed=0)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        result = Trainer(cfg, CPU).fit()
    trained = _all_row(caplog.text)
    assert result.final_metrics["metrics/mAP50"] > 0.01  # the blocks are learnt in 20 steps
    capsys.readouterr()
    assert main(["val", "--weights", str(result.best), "--data", str(blocks), "--workers", "0",
                 "--project", str(tmp_path), "--name", "val"]) == 0  # fmt: skip
    assert _all_row(capsys.readouterr().out) == trained
    ran = yaml.safe_load((result.run_dir / "decisions.yaml").read_text())
    assert set(ran) == {"train", "val"} and ran["val"]["runtime"]["value"] == "openvino"
    assert ran["train"]["layout"]["source"] == "rule"
    assert yaml.safe_load((tmp_path / "val" / "decisions.yaml").read_text())["val"] == ran["val"]

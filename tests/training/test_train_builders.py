"""The builders a Trainer is made of, each on its own: model (freezing, resuming), optimisation, resumable
state, data, and the epoch loop."""

import copy
import math
from dataclasses import dataclass

import pytest
import torch
import yaml
from torch import nn

from tphyolo.checkpoint.format import load_checkpoint, save_checkpoint
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.distributed import DistContext
from tphyolo.training.config import TrainConfig
from tphyolo.training.data import build_data, grid_stride, load_train_data_config
from tphyolo.training.hyp import load_hyp, scale_hyp
from tphyolo.training.loop import EpochPlace, NonFiniteLossError, StepState, train_one_epoch
from tphyolo.training.model.setup import build_model_for_training, freeze_layers
from tphyolo.training.optim.ema import ModelEMA
from tphyolo.training.optim.optimization import Optimization, build_optimization, warmup_length
from tphyolo.training.state import (
    TrainProgress,
    restore_training,
    resume_config,
    strip_for_release,
    training_checkpoint,
)

CPU = RuntimeConfig(device="cpu")
DEVICE = torch.device("cpu")


def layer_of(name: str) -> int:
    return int(name.split(".")[1])


@pytest.fixture(scope="module")
def yolov5n() -> nn.Module:
    """A fresh yolov5n for classes a, b (tests take copies)."""
    return build_model_for_training("yolov5n", names=("a", "b"))


def test_freeze_layers_stops_gradients_of_the_first_layers_only(yolov5n):
    model = copy.deepcopy(yolov5n)
    freeze_layers(model, 3)
    frozen = {layer_of(n) for n, p in model.named_parameters() if not p.requires_grad}
    trained = {layer_of(n) for n, p in model.named_parameters() if p.requires_grad}
    assert frozen == {0, 1, 2} and min(trained) == 3 and max(trained) == len(model.model) - 1
    freeze_layers(model, 0)
    assert all(p.requires_grad for p in model.parameters())


def test_model_is_fresh_for_the_data_or_the_resumed_one(yolov5n, tmp_path):
    assert (yolov5n.nc, yolov5n.names) == (2, ["a", "b"])  # the fixture: build_model_for_training for a, b
    unnamed = build_model_for_training(yaml.safe_dump({**yolov5n.yaml, "nc": 3}), names=())  # data without names
    assert unnamed.nc == 3 and unnamed.names == ["0", "1", "2"]

    trained = copy.deepcopy(yolov5n)
    with torch.no_grad():
        trained.model[0].conv.weight.fill_(0.5)
    payload = {"model": trained.state_dict(), "model_yaml": trained.yaml, "names": ["car", "van"], "nc": 2}
    path = save_checkpoint(tmp_path / "last.pt", payload)
    resumed = build_model_for_training("yolov5s", names=("x",), resume=load_checkpoint(path))
    assert resumed.names == ["car", "van"] and resumed.yaml == trained.yaml
    assert all(torch.equal(v, trained.state_dict()[k]) for k, v in resumed.state_dict().items())


def test_optimization_follows_the_config_and_skips_frozen_layers(yolov5n):
    model = copy.deepcopy(yolov5n)
    freeze_layers(model, 10)
    hyp = load_hyp("scratch-low")
    cfg = TrainConfig(batch=4, nominal_batch=16, epochs=10, warmup_min_steps=3, optimizer="SGD")
    optim = build_optimization(
        cfg, model, hyp, batches_per_epoch=5, world_size=2, with_ema=False, runtime=CPU, device=DEVICE
    )
    assert optim.accumulate == 2  # 16 images per step / (4 images x 2 processes)
    assert optim.warmup_steps == round(hyp["warmup_epochs"] * 5) == 15
    assert optim.ema is None and not optim.scaler.is_enabled()
    groups = optim.optimizer.param_groups
    assert [g["weight_decay"] for g in groups] == [0.0, pytest.approx(hyp["weight_decay"] * 4 * 2 * 2 / 64), 0.0]
    in_optimizer = {id(p) for g in groups for p in g["params"]}
    assert in_optimizer == {id(p) for p in model.parameters() if p.requires_grad}
    assert optim.lr_factor(0) == 1.0 and optim.lr_factor(9) == pytest.approx(hyp["lrf"])
    assert [g["lr"] for g in groups] == [hyp["lr0"]] * 3

    short = build_optimization(
        TrainConfig(warmup_min_steps=50, optimizer="AdamW", nominal_batch=8), model, hyp, batches_per_epoch=5,
        world_size=1, with_ema=True, runtime=CPU, device=DEVICE,
    )  # fmt: skip
    assert short.warmup_steps == 50 and short.ema is not None and short.ema.updates == 0


def test_training_state_round_trips_through_a_checkpoint(yolov5n, tmp_path):
    cfg = TrainConfig(epochs=5, optimizer="SGD", nominal_batch=64)
    hyp = load_hyp("scratch-low")

    def parts():
        model = copy.deepcopy(yolov5n)
        optim = build_optimization(
            cfg, model, hyp, batches_per_epoch=4, world_size=1, with_ema=True, runtime=CPU, device=DEVICE
        )
        return model, optim

    model, optim = parts()
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.01)
    optim.optimizer.step()
    optim.ema.update(model)
    optim.scheduler.step()
    progress = TrainProgress(start_epoch=0, best_fitness=0.25, steps=StepState(step=7, last_opt_step=6))
    path = tmp_path / "run" / "weights" / "last.pt"
    path.parent.mkdir(parents=True)
    save_checkpoint(path, training_checkpoint(model, optim, cfg=cfg, epoch=1, progress=progress))
    next_draw = torch.rand(3)  # what the RNG gives right after the checkpoint
    torch.manual_seed(12345)

    ckpt = load_checkpoint(path)
    _, restored = parts()
    state = restore_training(ckpt, restored, epochs=cfg.epochs, restore_rng=True)
    assert torch.equal(torch.rand(3), next_draw)
    assert (state.start_epoch, state.best_fitness, state.steps.step, state.steps.last_opt_step) == (2, 0.25, 7, 6)
    assert restored.ema.updates == 1 and restored.scheduler.last_epoch == 1
    for key, value in optim.optimizer.state_dict()["state"].items():
        assert torch.equal(restored.optimizer.state_dict()["state"][key]["momentum_buffer"], value["momentum_buffer"])
    assert resume_config(path, ckpt) == TrainConfig(
        epochs=5, optimizer="SGD", nominal_batch=64, project=str(tmp_path), name="run", exist_ok=True
    )
    assert restore_training(ckpt, parts()[1], epochs=2, restore_rng=False).trained_out(epochs=2, patience=0)
    strip_for_release(path)  # a run's last act: the run is finished
    with pytest.raises(ValueError, match="already finished its 2 epochs"):
        restore_training(load_checkpoint(path), parts()[1], epochs=2, restore_rng=False)


def test_data_is_sharded_and_validation_dealt_in_whole_batches(tiny_synthetic):
    cfg = TrainConfig(data=str(tiny_synthetic), batch=1, workers=0)
    config = load_train_data_config(cfg.data, DistContext())
    model = build_model_for_training("tph-yolov5n", names=config.names)
    stride = grid_stride(model)
    hyp = scale_hyp(load_hyp("synthetic"), num_levels=model.head.nl, num_classes=model.nc, imgsz=128)
    main = build_data(cfg, config, hyp=hyp, imgsz=128, stride=stride, dist=DistContext(), device=DEVICE)
    assert (main.imgsz, main.stride, len(main.train_set)) == (128, 32, 8)
    assert main.train_loader.batch_size == 1 and main.val_loader.batch_size == 2
    assert main.val_shard.indices == (0, 1, 2, 3) and len(main.val_loader) == 2
    second = build_data(
        cfg, config, hyp=hyp, imgsz=128, stride=stride, dist=DistContext(rank=1, local_rank=1, world_size=2),
        device=DEVICE,
    )  # fmt: skip
    assert len(second.train_loader.sampler) == 4
    assert second.val_shard.indices == (2, 3) and list(second.val_loader.sampler) == [2, 3]  # the second batch


def test_both_loaders_fork_their_workers_once(tiny_synthetic):
    """Workers forked again at every validation would share the heap that training has grown (kept for reuse,
    `tphyolo.runtime.cpu_memory`), and every page the trainer then writes would be copied: both loaders keep theirs."""
    cfg = TrainConfig(data=str(tiny_synthetic), batch=2, workers=2)
    config = load_train_data_config(cfg.data, DistContext())
    model = build_model_for_training("tph-yolov5n", names=config.names)
    hyp = scale_hyp(load_hyp("synthetic"), num_levels=model.head.nl, num_classes=model.nc, imgsz=128)
    data = build_data(cfg, config, hyp=hyp, imgsz=128, stride=grid_stride(model), dist=DistContext(), device=DEVICE)
    assert data.train_loader.persistent_workers and data.val_loader.persistent_workers
    assert data.val_loader.num_workers == 2


@dataclass
class ToyBatch:
    images: torch.Tensor  # (B, 3, H, W) uint8
    targets: torch.Tensor

    def to(self, device, non_blocking=False):
        return self


class ToyModel(nn.Module):
    """A convolution that records the inputs it was given."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 1)
        self.inputs = []

    def forward(self, x):
        self.inputs.append(x)
        return [self.conv(x)]


def run_toy_epoch(model, losses, *, runtime=CPU, accumulate=2):
    loader = [ToyBatch(torch.full((2, 3, 4, 4), 255, dtype=torch.uint8), torch.zeros(0, 6)) for _ in losses]
    values = iter(losses)

    def loss_fn(preds, targets):
        loss = preds[0].square().mean() * next(values)
        return loss, torch.stack([loss.detach()] * 3)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ema, state = ModelEMA(model), StepState()
    optim = Optimization(
        optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1.0), lambda epoch: 1.0,
        torch.amp.GradScaler("cpu", enabled=False), ema, accumulate=accumulate, warmup_steps=-1,
    )  # fmt: skip
    items = train_one_epoch(
        model, loss_fn, loader, optim, state=state, epoch=0, hyp={},
        place=EpochPlace(runtime, DEVICE, DistContext()),
    )  # fmt: skip
    return items, ema, state


def test_epoch_prepares_images_by_the_runtime_and_accumulates():
    model = ToyModel().to(memory_format=torch.channels_last)
    items, ema, state = run_toy_epoch(model, [1.0] * 6, runtime=RuntimeConfig(device="cpu", channels_last=True))
    x = model.inputs[0]
    assert x.dtype == torch.float32 and x.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(x, torch.ones_like(x))  # 255 -> 1.0
    assert ema.updates == 3 and (state.step, state.last_opt_step) == (6, 5)  # a step every 2nd batch
    assert items.shape == (3,) and math.isfinite(items.sum().item()) and items.sum() > 0


def test_epoch_skips_non_finite_losses_and_stops_after_five_in_a_row():
    _, ema, state = run_toy_epoch(ToyModel(), [1.0, math.nan, 1.0, 1.0], accumulate=1)
    assert state.step == 4 and ema.updates == 3 and state.nonfinite_in_a_row == 0
    with pytest.raises(NonFiniteLossError, match="5 batches in a row"):
        run_toy_epoch(ToyModel(), [1.0] + [math.inf] * 5)


@pytest.mark.parametrize(
    ("warmup_epochs", "batches", "min_steps", "epochs", "expected"),
    [
        (3.0, 404, 100, 300, 1212),  # a real run: warmup_epochs of batches
        (3.0, 10, 100, 20, 100),  # the quick job: the minimum, exactly half the run
        (3.0, 10, 100, 3, 15),  # a 3-epoch demo: half of its 30 batches
        (0.0, 1, 100, 1, 1),  # a one-batch run still warms up for its single batch
    ],
)
def test_warmup_is_yolov5s_rule_but_never_more_than_half_the_run(warmup_epochs, batches, min_steps, epochs, expected):
    assert warmup_length(warmup_epochs, batches, min_steps, epochs) == expected

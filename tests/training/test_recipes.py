"""Training recipes: the dataset decides the defaults of hyp, optimiser and nominal batch; flags win."""

import logging
from pathlib import Path

import pytest
import yaml

from tphyolo.data.dataset_config import DataConfig, load_data_config
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.optim.rules import optimiser_steps
from tphyolo.training.recipes import MIN_OPTIMISER_STEPS, fit_nominal_batch, recipe_name, resolve_recipe
from tphyolo.training.trainer import Trainer


def _data(tmp_path: Path, **values) -> DataConfig:
    path = tmp_path / "data.yaml"
    path.write_text(yaml.safe_dump({"train": "images", "val": "images", **values}))
    return load_data_config(path)


def _settings(cfg: TrainConfig) -> tuple:
    return cfg.hyp, cfg.optimizer, cfg.nominal_batch


def test_the_synthetic_sets_keep_the_quick_job_recipe(tiny_synthetic):
    cfg, recipe = resolve_recipe(TrainConfig(), load_data_config(tiny_synthetic))
    assert _settings(cfg) == ("synthetic", "AdamW", 8) and recipe.name == "synthetic" and recipe.given == ()


def test_an_old_synthetic_cache_without_a_recipe_line_still_gets_the_quick_job(tmp_path):
    from tphyolo.data.builtin import synthetic

    name = f"synthetic-v{synthetic.GENERATOR_VERSION}-s0-80x20-640"
    (tmp_path / name).mkdir()  # the cached set of an older version: its yaml has no `recipe:` line
    (tmp_path / name / "data.yaml").write_text(yaml.safe_dump({"train": "t", "val": "v", "names": ["car"]}))
    assert recipe_name(load_data_config("synthetic", cache_dir=tmp_path))[0] == "synthetic"


def test_visdrone_gets_its_hyp_with_sgd_and_nominal_batch_64(tmp_path):
    (tmp_path / "VisDrone" / "VisDrone2019-DET-val" / "images").mkdir(parents=True)  # a downloaded split
    builtin = load_data_config("visdrone", datasets_dir=tmp_path)
    cfg, recipe = resolve_recipe(TrainConfig(data="visdrone"), builtin)
    assert _settings(cfg) == ("visdrone", "Adam", 64) and recipe.reason == "named by the dataset's yaml"
    by_classes = _data(tmp_path, names=list(VISDRONE_NAMES))  # a converted set: VisDrone's classes, no recipe
    cfg, recipe = resolve_recipe(TrainConfig(), by_classes)
    assert _settings(cfg) == ("visdrone", "Adam", 64) and "VisDrone's classes" in recipe.reason


def test_other_data_gets_yolov5_scratch_low_with_sgd(tmp_path):
    cfg, recipe = resolve_recipe(TrainConfig(), _data(tmp_path, names=["cat", "dog"]))
    assert _settings(cfg) == ("scratch-low", "SGD", 64) and recipe.name == "default"


def test_given_settings_win_and_the_line_names_them(tmp_path):
    given = TrainConfig(optimizer="Adam", nominal_batch=16)
    cfg, recipe = resolve_recipe(given, _data(tmp_path, names=list(VISDRONE_NAMES), recipe="visdrone"))
    assert _settings(cfg) == ("visdrone", "Adam", 16)
    assert recipe.describe(cfg) == (
        "recipe: visdrone (hyp visdrone, Adam, nbs 16) -- named by the dataset's yaml; --optimizer, --nbs given"
    )


def test_a_run_with_every_setting_given_says_it_uses_no_recipe(tmp_path):
    given = TrainConfig(hyp="scratch-low", optimizer="AdamW", nominal_batch=32)
    cfg, recipe = resolve_recipe(given, _data(tmp_path, names=list(VISDRONE_NAMES)))
    assert _settings(cfg) == ("scratch-low", "AdamW", 32)
    assert recipe.describe(cfg) == "recipe: none (hyp scratch-low, AdamW, nbs 32) -- all given"


def test_a_resumed_run_says_its_settings_are_the_saved_ones(tmp_path):
    saved = TrainConfig(hyp="visdrone", optimizer="SGD", nominal_batch=64)  # as a checkpoint holds them
    cfg, recipe = resolve_recipe(saved, _data(tmp_path, names=list(VISDRONE_NAMES)))
    assert recipe.describe(cfg, resumed=True) == "recipe settings of the resumed run (hyp visdrone, SGD, nbs 64)"


def test_an_unknown_recipe_name_is_refused_naming_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"data.yaml: unknown recipe 'fast'; known: \['default', 'synthetic'"):
        resolve_recipe(TrainConfig(), _data(tmp_path, names=["a"], recipe="fast"))
    with pytest.raises(ValueError, match="data.yaml: 'recipe' must be a recipe name"):
        _data(tmp_path, names=["a"], recipe=3)


def _fit(tmp_path: Path, cfg: TrainConfig, *, batches_per_epoch: int, warmup_epochs: float, world_size: int = 1):
    resolved, recipe = resolve_recipe(cfg, _data(tmp_path, names=list(VISDRONE_NAMES)))
    return fit_nominal_batch(resolved, recipe, batches_per_epoch=batches_per_epoch, world_size=world_size,
                             warmup_epochs=warmup_epochs)  # fmt: skip


def test_a_small_training_set_gets_a_nominal_batch_that_takes_enough_steps(tmp_path):
    # Before: 40 images (5 batches of 8) for 10 epochs kept the recipe's nbs 64, 10 optimiser steps in the run.
    cfg, recipe = _fit(tmp_path, TrainConfig(epochs=10, batch=8), batches_per_epoch=5, warmup_epochs=3)
    assert optimiser_steps(batches=50, warmup_steps=25, accumulate=8) == 10
    assert cfg.nominal_batch == 8  # 50 batches cannot make 100 steps: step every batch
    assert recipe.describe(cfg) == (
        "recipe: visdrone (hyp visdrone, Adam, nbs 8) -- the dataset has VisDrone's classes; nbs 64 lowered to 8: "
        "this run's 50 batches of 8 images take 10 optimiser steps at nbs 64, 50 at 8 (at least 100 where it has "
        "them; --nbs to choose)"
    )
    # 30 batches of 8 for 10 epochs: the largest accumulation that still takes 100 steps, not one batch
    cfg, _ = _fit(tmp_path, TrainConfig(epochs=10, batch=8), batches_per_epoch=30, warmup_epochs=3)
    accumulate = cfg.nominal_batch // 8
    assert 1 < accumulate < 8 and cfg.nominal_batch % 8 == 0
    assert optimiser_steps(batches=300, warmup_steps=100, accumulate=accumulate) >= MIN_OPTIMISER_STEPS
    assert optimiser_steps(batches=300, warmup_steps=100, accumulate=accumulate + 1) < MIN_OPTIMISER_STEPS
    # two processes of 4 images each: the nominal batch counts the 8 images of a step
    cfg, _ = _fit(tmp_path, TrainConfig(epochs=10, batch=4), batches_per_epoch=5, warmup_epochs=3, world_size=2)
    assert cfg.nominal_batch == 8


def test_a_large_training_set_or_a_given_nbs_keeps_the_nominal_batch(tmp_path):
    cfg, recipe = _fit(tmp_path, TrainConfig(epochs=10, batch=8), batches_per_epoch=100, warmup_epochs=3)
    assert cfg.nominal_batch == 64 and recipe.fitted == ""  # 1000 batches: 125 steps at nbs 64
    given = TrainConfig(epochs=10, batch=8, nominal_batch=64)
    cfg, recipe = _fit(tmp_path, given, batches_per_epoch=5, warmup_epochs=3)
    assert cfg.nominal_batch == 64 and recipe.fitted == ""  # the user's --nbs stands (the run warns instead)
    quick, recipe = resolve_recipe(TrainConfig(epochs=8), _data(tmp_path, names=["car"], recipe="synthetic"))
    fitted = fit_nominal_batch(quick, recipe, batches_per_epoch=10, world_size=1, warmup_epochs=3)
    assert fitted == (quick, recipe)  # nbs 8 with batches of 8 steps every batch already: nothing to lower


def test_a_run_says_its_recipe_and_saves_the_resolved_values(tiny_synthetic, tmp_path, caplog):
    data = yaml.safe_load(tiny_synthetic.read_text())
    del data["recipe"]  # an ordinary yaml of the same images: the default recipe
    data["path"] = str(tiny_synthetic.parent)
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(data))
    cfg = TrainConfig(data=str(plain), imgsz=64, batch=2, epochs=1, workers=0, plots=False,
                      project=str(tmp_path / "runs"), hyp="scratch-high")  # fmt: skip
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        trainer = Trainer(cfg, RuntimeConfig(device="cpu"))
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("recipe")]
    assert line.startswith("recipe: default (hyp scratch-high, SGD, nbs 2) -- the dataset names no recipe; --hyp "
                           "given; nbs 64 lowered to 2: this run's 4 batches of 2 images take 1 optimiser step")
    saved = yaml.safe_load((trainer.run_dir / "args.yaml").read_text())  # what a resume trains with
    assert (saved["hyp"], saved["optimizer"], saved["nominal_batch"]) == ("scratch-high", "SGD", 2)
    assert type(trainer.optim.optimizer).__name__ == "SGD" and trainer.optim.accumulate == 1

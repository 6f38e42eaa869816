"""Training data given as a folder or a built-in name: real class names, --datasets-dir, and a warning when
validation images are training images."""

import argparse
import logging

from tphyolo.commands import val as val_cmd
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.distributed import DistContext
from tphyolo.training.config import TrainConfig
from tphyolo.training.data import load_train_data_config
from tphyolo.training.trainer import Trainer


def test_a_plain_visdrone_folder_trains_with_visdrone_names_recipe_and_a_warning(tiny_synthetic, tmp_path, caplog):
    folder = tiny_synthetic.parent / "train" / "images"  # VisDrone-format annotations beside the images
    assert load_train_data_config(str(folder), DistContext()).names == VISDRONE_NAMES
    cfg = TrainConfig(data=str(folder), imgsz=128, batch=4, epochs=1, workers=0, plots=False, project=str(tmp_path))
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        trainer = Trainer(cfg, RuntimeConfig(device="cpu"))
    assert trainer.names == list(VISDRONE_NAMES) and trainer.cfg.hyp == "visdrone"
    assert "recipe: visdrone" in caplog.text
    assert "8 of the 8 validation images are also training images" in caplog.text


def test_separate_splits_give_no_warning(tiny_synthetic, tmp_path, caplog):
    cfg = TrainConfig(data=str(tiny_synthetic), imgsz=128, batch=4, epochs=1, workers=0, plots=False,
                      project=str(tmp_path))  # fmt: skip
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        Trainer(cfg, RuntimeConfig(device="cpu"))
    assert "also training images" not in caplog.text


def test_datasets_dir_anchors_the_builtin_configs_for_train_and_val(tmp_path):
    (tmp_path / "VisDrone" / "VisDrone2019-DET-train" / "images").mkdir(parents=True)  # a downloaded split
    config = load_train_data_config("visdrone", DistContext(), datasets_dir=str(tmp_path))
    assert config.root == tmp_path / "VisDrone" and config.names == VISDRONE_NAMES
    parser = argparse.ArgumentParser()
    val_cmd.add_arguments(parser)
    assert parser.parse_args(["--weights", "w.pt", "--data", "visdrone", "--datasets-dir", "d"]).datasets_dir == "d"
    assert TrainConfig(datasets_dir=str(tmp_path)).datasets_dir == str(tmp_path)

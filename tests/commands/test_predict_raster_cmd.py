"""`tphyolo predict --source ortho.tif --save-geojson`: the raster path of the command, its outputs and refusals."""

import json

import numpy as np
import pytest
import torch
from tests.helpers import exit_code, save_model_checkpoint
from tests.predict.geotiffs import map_corners, scene, write_geotiff

from tphyolo.cli import main
from tphyolo.models import build_model


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "tiny.pt"
    return save_model_checkpoint(path, build_model("yolov5n", num_classes=2), ["car", "bus"])


@pytest.fixture(scope="module")
def ortho(tmp_path_factory):
    data = scene(160, 240, [(40, 40, 90, 80, 0)], border=64)
    return write_geotiff(tmp_path_factory.mktemp("geo") / "ortho.tif", data)


def test_predict_writes_geojson_txt_and_json_of_one_raster(weights, ortho, tmp_path, capsys):
    argv = ["predict", "--weights", str(weights), "--source", str(ortho), "--device", "cpu", "--conf", "0.001",
            "--slice", "64", "--img", "64", "--batch", "4", "--save-geojson", "--save-txt", "--save-conf",
            "--save-json", "--project", str(tmp_path), "--name", "run"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    run = tmp_path / "run"
    collection = json.loads((run / "ortho.geojson").read_text())
    lines = (run / "labels" / "ortho.txt").read_text().splitlines()
    records = json.loads((run / "predictions.json").read_text())
    assert len(collection["features"]) == len(lines) == len(records) > 0
    assert f"{len(lines)} detections in ortho.tif (240x160, EPSG:32633)" in out and "NoData skipped" in out
    for feature, record in zip(collection["features"], records, strict=True):
        x, y, w, h = record["bbox"]
        np.testing.assert_allclose(feature["geometry"]["coordinates"][0], map_corners(x, y, x + w, y + h),
                                   atol=0.01)  # fmt: skip
        assert x + w > 64  # nothing from the NoData border (the first 64 columns are never run)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--bands", "1", "2"], "--bands 1 2: give one band (grey) or three (R G B)"),
        (["--save-geojson", "--to-crs", "EPSG:4326", "--slice-full"], "--slice-full: a raster is run tile by tile"),
        (["--to-crs", "EPSG:4326"], "--to-crs reprojects --save-geojson; add --save-geojson or drop it"),
    ],
)
def test_raster_flags_are_refused_in_one_line(weights, ortho, tmp_path, capsys, flags, message):
    argv = ["predict", "--weights", str(weights), "--source", str(ortho), "--device", "cpu", "--project",
            str(tmp_path)] + (["--slice", "64"] if "--slice-full" in flags else []) + flags  # fmt: skip
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_raster_flags_without_a_raster_are_refused(weights, tmp_path, capsys):
    image = tmp_path / "a.jpg"
    image.write_bytes(b"")
    assert exit_code(["predict", "--weights", str(weights), "--source", str(image), "--save-geojson"]) == 2
    assert "--save-geojson need(s) a raster --source" in capsys.readouterr().err

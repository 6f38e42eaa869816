"""Rasters that could exhaust time or end a run without naming the file: a header declaring more pixels than the
limit, a --to-crs PROJ does not know (checked before anything runs, even when the run would find nothing) or
asked of a raster without a CRS, a GeoTIFF cut short. Every raster here is written by the test."""

from __future__ import annotations

from pathlib import Path

import pytest
import rasterio
from tests.helpers import one_error_line
from tests.predict.geotiffs import TRANSFORM, random_checkpoint, scene, write_geotiff

from tphyolo.cli import main
from tphyolo.data.files.raster import MAX_RASTER_PIXELS


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    return random_checkpoint(tmp_path_factory.mktemp("weights"))


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return write_geotiff(tmp_path_factory.mktemp("geo") / "small.tif", scene(160, 240, [(40, 40, 90, 80, 0)]))


def _predict(weights: Path, source: Path, out: Path, *extra: str) -> int:
    return main(["predict", "--weights", str(weights), "--source", str(source), "--img", "64", "--slice", "64",
                 "--conf", "0.001", "--device", "cpu", "--save-geojson", "--project", str(out), "--name", "run",
                 *extra])  # fmt: skip


def test_a_header_above_the_pixel_limit_is_refused_naming_the_file_and_its_size(weights, tmp_path, capsys):
    path = tmp_path / "huge.tif"  # 200,000 x 100,000 px declared, a few MB on disk: no block is written
    with rasterio.open(path, "w", driver="GTiff", width=200_000, height=100_000, count=3, dtype="uint8",
                       crs="EPSG:32633", transform=TRANSFORM, nodata=0, tiled=True, blockxsize=512, blockysize=512,
                       sparse_ok=True, bigtiff="yes"):  # fmt: skip
        pass
    assert path.stat().st_size < 8 * 1024**2 and MAX_RASTER_PIXELS < 200_000 * 100_000
    assert _predict(weights, path, tmp_path) == 2
    line = one_error_line(capsys.readouterr().err, "predict")
    assert f"{path}: 200000x100000 pixels (20.0 gigapixels) is above the raster limit of 10,000,000,000" in line
    assert "--max-pixels" in line
    assert not (tmp_path / "run").exists()


def test_max_pixels_sets_the_limit_and_the_run_says_how_many_tiles_it_takes(weights, small, tmp_path, capsys):
    assert _predict(weights, small, tmp_path, "--max-pixels", "38399") == 2  # 240 x 160 = 38,400
    assert "240x160 pixels (0.04 megapixels) is above the raster limit of 38,399" in one_error_line(
        capsys.readouterr().err, "predict")
    assert _predict(weights, small, tmp_path, "--max-pixels", "38400") == 0
    out = capsys.readouterr().out
    assert "small.tif: 240x160 px, 15 tiles to run" in out  # 5 columns x 3 rows of 64 px at overlap 0.2
    assert out.index("tiles to run") < out.index("detections in small.tif")


@pytest.mark.parametrize("crs", ["EPSG:999999", "garbage", "EPSG:4326;rm"])
def test_a_bad_to_crs_is_named_before_the_run(weights, tmp_path, crs, capsys):
    empty = write_geotiff(tmp_path / "empty.tif", scene(64, 64, [], border=64))  # all NoData: finds nothing
    assert _predict(weights, empty, tmp_path, "--to-crs", crs) == 2
    line = one_error_line(capsys.readouterr().err, "predict")
    assert line.startswith(f"tphyolo predict: error: --to-crs {crs}: not a coordinate reference system PROJ knows")
    assert not (tmp_path / "run").exists()


def test_to_crs_of_a_raster_without_crs_is_refused_before_any_tile(weights, tmp_path, capsys):
    plain = write_geotiff(tmp_path / "plain.tif", scene(128, 128, []), crs=None)
    assert _predict(weights, plain, tmp_path, "--to-crs", "EPSG:4326") == 2
    captured = capsys.readouterr()
    assert f"--to-crs EPSG:4326: {plain} has no CRS to reproject from" in one_error_line(captured.err, "predict")
    assert "tiles to run" not in captured.out


def test_a_geotiff_cut_short_skips_its_unreadable_tiles_naming_the_file(weights, tmp_path, capsys):
    whole = write_geotiff(tmp_path / "whole.tif", scene(700, 800, [(300, 150, 430, 230, 0)]))
    data = whole.read_bytes()
    cut = tmp_path / "cut.tif"
    cut.write_bytes(data[: len(data) // 2])  # the header and the first blocks: the last rows are gone
    assert _predict(weights, cut, tmp_path, "--slice", "256") == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    warnings = [line for line in captured.err.splitlines() if "could not be read" in line]
    assert len(warnings) == 1 and f"warning: {cut}: pixels x " in warnings[0] and "IReadBlock failed" in warnings[0]
    (summary,) = [line for line in captured.out.splitlines() if "detections in cut.tif" in line]
    unreadable = int(summary.split(" unreadable skipped")[0].rsplit(" ", 1)[1])
    assert 0 < unreadable < 20  # 20 tiles of 256 px in all; the first rows were read
    assert (tmp_path / "run" / "cut.geojson").is_file()


def test_a_geotiff_with_no_readable_tile_exits_1(weights, tmp_path, capsys):
    whole = write_geotiff(tmp_path / "whole.tif", scene(300, 300, []))
    data = bytearray(whole.read_bytes())
    with rasterio.open(whole) as dataset:  # zero every block: none of them inflates any more
        first = min(int(dataset.get_tag_item(f"BLOCK_OFFSET_{i}_{j}", "TIFF", bidx=1)) for i in (0, 1) for j in (0, 1))
    data[first:] = bytes(len(data) - first)
    broken = tmp_path / "broken.tif"
    broken.write_bytes(bytes(data))
    assert _predict(weights, broken, tmp_path, "--slice", "256") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{broken}: no tile could be read" in one_error_line(err, "predict")

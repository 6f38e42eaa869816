"""Prediction over GeoTIFFs tile by tile, with a detector that sees: GeoJSON coordinates are the pixel boxes
through the raster's transform, NoData tiles never run, COG/16-bit/4-band rasters give the same boxes."""

import json
import logging

import numpy as np
import pytest
import rasterio
import rasterio.shutil
import torch
from tests.infer.block_finder import BlockFinder
from tests.predict.geotiffs import map_corners, scene, write_geotiff

from tphyolo.data.files.raster import Raster
from tphyolo.infer.slicing import SliceConfig
from tphyolo.predict.geojson import geojson_collection
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.raster import predict_raster

# 600 x 400 px, NoData in the first 150 columns; one red block across the tile seams at x = 256, one green.
BLOCKS = [(200, 100, 330, 160, 0), (400, 300, 440, 330, 1)]
SLICES = SliceConfig(256, 0.25, skip_empty=True)  # tiles at x 0, 192, 344 and y 0, 144: 6 tiles
TRUTH = torch.tensor([b[:4] for b in BLOCKS], dtype=torch.float32)


@pytest.fixture(scope="module")
def finder():
    return BlockFinder()


def _predictor(finder, **settings):
    return Predictor(finder, imgsz=256, conf=0.1, device="cpu", merge="greedy-nmm", match="ios", **settings)


def _sorted(detections):
    order = detections.boxes[:, 0].argsort()
    return detections.boxes[order], detections.labels[order]


@pytest.fixture(scope="module")
def ortho(tmp_path_factory):
    return write_geotiff(tmp_path_factory.mktemp("geo") / "ortho.tif", scene(400, 600, BLOCKS, border=150))


def test_geojson_coordinates_are_the_pixel_boxes_through_the_transform(finder, ortho):
    run = predict_raster(_predictor(finder), ortho, slicing=SLICES)
    boxes, labels = _sorted(run.detections)
    torch.testing.assert_close(boxes, TRUTH, atol=1.0, rtol=0)  # the red block merged across the seam
    assert labels.tolist() == [0, 1] and run.crs == "EPSG:32633"
    collection = geojson_collection(run.detections, names=finder.names, transform=run.transform, crs=run.crs)
    assert collection["crs"]["properties"]["name"] == "urn:ogc:def:crs:EPSG::32633"
    for feature, box in zip(collection["features"], run.detections.boxes.tolist(), strict=True):
        np.testing.assert_allclose(feature["geometry"]["coordinates"][0], map_corners(*box), atol=1e-6)
        assert feature["properties"]["class"] == finder.names[feature["properties"]["class_id"]]
    wgs84 = geojson_collection(run.detections, names=finder.names, transform=run.transform, crs=run.crs,
                               to_crs="EPSG:4326")  # fmt: skip
    lon, lat = wgs84["features"][0]["geometry"]["coordinates"][0][0]
    assert 14.9 < lon < 15.1 and 40.6 < lat < 40.7  # 500 km east in zone 33N is its central meridian, 15 E


def test_nodata_tiles_never_run(finder, ortho):
    seen = []
    handle = finder.register_forward_hook(lambda module, inputs, output: seen.extend(inputs[0].unbind(0)))
    try:
        run = predict_raster(_predictor(finder), ortho, slicing=SliceConfig(128, 0.0))
    finally:
        handle.remove()
    # 128 px tiles without overlap: x 0..128 lies in the 150 px NoData border, and x 128..256 does not.
    assert run.tiles == 5 * 4 and run.skipped == 4  # 600 px: tiles at 0, 128, 256, 384, 472; 4 rows
    assert len(seen) == run.tiles - run.skipped
    assert all(image.float().max() > 0 for image in seen)


def test_cog_with_overviews_16_bit_and_4_band_rasters_give_the_same_boxes(finder, ortho, tmp_path):
    expected = _sorted(predict_raster(_predictor(finder), ortho, slicing=SLICES).detections)
    data = scene(400, 600, BLOCKS, border=150)
    cog = tmp_path / "ortho_cog.tif"
    with rasterio.open(write_geotiff(tmp_path / "tiled.tif", data, overviews=True)) as src:
        rasterio.shutil.copy(src, cog, driver="COG", blocksize=128, overviews="FORCE_USE_EXISTING")
    wide = write_geotiff(tmp_path / "u16.tif", data.astype(np.uint16) * 200)
    nir = write_geotiff(tmp_path / "rgbn.tif", np.concatenate([data, data[:1]]))
    for path in (cog, wide, nir):
        got = _sorted(predict_raster(_predictor(finder), path, slicing=SLICES).detections)
        torch.testing.assert_close(got[0], expected[0], atol=1.0, rtol=0, msg=path.name)
        assert torch.equal(got[1], expected[1]), path.name
    with rasterio.open(cog) as src:
        assert src.overviews(1) == [2, 4, 8] and src.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG"


def test_16_bit_bands_are_stretched_from_their_2nd_to_98th_percentile(tmp_path):
    data = scene(400, 600, BLOCKS, border=150).astype(np.uint16) * 200
    with Raster.open(write_geotiff(tmp_path / "u16.tif", data)) as raster:
        valid = data[0][:, 150:].astype(np.float64)
        low, high = np.percentile(valid, (2, 98))
        assert raster.stretch.low[0] == pytest.approx(low) and raster.stretch.high[0] == pytest.approx(high)
        tile = raster.read((150, 0, 250, 50))  # ground only: values between low and high map into 0..255
        expected = ((data[0, :50, 150:250] - low) / (high - low) * 255).clip(0, 255).round()
        np.testing.assert_array_equal(tile[..., 2], expected.astype(np.uint8))  # BGR: red is last


def test_bands_rule_and_refusals(tmp_path):
    data = scene(100, 100, [])
    with Raster.open(write_geotiff(tmp_path / "grey.tif", data[:1])) as raster:
        assert raster.bands == (1, 1, 1)
    with Raster.open(write_geotiff(tmp_path / "rgbn.tif", np.concatenate([data, data[:1]])), bands=(4, 2, 1)) as r:
        assert r.bands == (4, 2, 1)
    two = write_geotiff(tmp_path / "two.tif", data[:2])
    with pytest.raises(ValueError, match="2 bands; choose one or three of them with --bands"):
        Raster.open(two)
    with pytest.raises(ValueError, match="--bands 5: .* has bands 1..2"):
        Raster.open(two, bands=(5,))
    (tmp_path / "fake.tif").write_bytes(b"not a tiff")
    with pytest.raises(ValueError, match="fake.tif: not a raster GDAL reads"):
        Raster.open(tmp_path / "fake.tif")


def test_a_raster_without_crs_runs_in_pixels_with_one_warning(finder, tmp_path, caplog):
    plain = write_geotiff(tmp_path / "plain.tif", scene(400, 600, BLOCKS), crs=None, nodata=None)
    with caplog.at_level(logging.WARNING):
        run = predict_raster(_predictor(finder), plain, slicing=SLICES)
    assert [r.message for r in caplog.records if "no CRS" in r.message] == [f"{plain} has no CRS: its detections "
                                                                           "stay in pixel coordinates"]
    collection = geojson_collection(run.detections, names=finder.names, transform=None, crs=run.crs)
    assert "crs" not in collection
    x1, y1, x2, y2 = run.detections.boxes[0].tolist()
    assert collection["features"][0]["geometry"]["coordinates"][0][2] == pytest.approx([x2, y2])
    json.dumps(collection)


def test_max_det_caps_each_window_of_a_raster_and_a_sliced_image_as_its_help_says(finder, ortho, capsys):
    """--max-det 1 on a raster whose two blocks lie in different tiles: one detection per tile, both blocks; the
    same pixels as a sliced image give the same two (the image's merge was capped per image: one block)."""
    from tphyolo.cli import main

    run = predict_raster(_predictor(finder, max_det=1), ortho, slicing=SLICES)
    boxes, labels = _sorted(run.detections)
    torch.testing.assert_close(boxes, TRUTH, atol=1.0, rtol=0)
    assert labels.tolist() == [0, 1]
    with Raster.open(ortho) as raster:
        image = raster.read((0, 0, raster.width, raster.height))
    sliced = _predictor(finder, max_det=1, slice=SLICES).predict_images([image])[0]
    torch.testing.assert_close(_sorted(sliced)[0], boxes, atol=0, rtol=0)
    with pytest.raises(SystemExit):
        main(["predict", "-h"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("--max-det MAX_DET most detections per window: the whole image, or each slice of a sliced image and "
            "tile of a raster, whose merged detections keep up to this many per window (default: 500)") in help_text


def _visdrone_mosaic(visdrone_mini, side: int = 160) -> np.ndarray:
    """(2 side, 3 side, 3) uint8 BGR: six real VisDrone frames' top-left corners side by side, dark pixels kept."""
    import cv2

    frames = [cv2.imread(str(p))[:side, :side] for p in sorted((visdrone_mini / "images").glob("*.jpg"))[:6]]
    return np.concatenate([np.concatenate(frames[:3], 1), np.concatenate(frames[3:], 1)], 0)


def test_the_same_pixels_as_a_png_and_a_geotiff_give_the_same_boxes(visdrone_mini, tmp_path):
    """An orthomosaic of real VisDrone frames, sliced, with a model that finds boxes everywhere at a low
    threshold: the GeoTIFF (nodata 0, as orthomosaics have) gives exactly the PNG's boxes, and --max-det caps
    both the same way. Before, a pixel whose red band was 0 read as NoData, black in all three bands (boxes
    parted), and the PNG's merge was capped per image where the raster's tiles were capped each."""
    import cv2
    from tests.predict.geotiffs import random_checkpoint

    from tphyolo.data.files.image_io import read_image

    mosaic = _visdrone_mosaic(visdrone_mini)
    assert (mosaic[..., 2] == 0).any() and not (mosaic == 0).all(-1).all()  # dark pixels: red 0, not black
    cv2.imwrite(str(tmp_path / "ortho.png"), mosaic)
    tif = write_geotiff(tmp_path / "ortho.tif", np.ascontiguousarray(mosaic[..., ::-1].transpose(2, 0, 1)), nodata=0)
    with Raster.open(tif) as opened:  # the same pixels: a dark pixel whose red is 0 is no NoData
        np.testing.assert_array_equal(opened.read((0, 0, opened.width, opened.height)), mosaic)
    weights = random_checkpoint(tmp_path)
    slicing = SliceConfig(128, 0.2)
    for max_det in (30_000, 20):
        settings = {"imgsz": 128, "conf": 0.001, "device": "cpu", "backend": "pytorch", "max_det": max_det,
                    "merge": "nms"}
        png = Predictor(str(weights), slice=slicing, **settings).predict_images([read_image(tmp_path / "ortho.png")])
        raster = predict_raster(Predictor(str(weights), **settings), tif, slicing=slicing).detections
        assert len(raster) > 20 * 4  # more than a per-image cap would keep
        torch.testing.assert_close(_ordered_rows(png[0]), _ordered_rows(raster), atol=0, rtol=0)


def _ordered_rows(detections) -> torch.Tensor:
    """(n, 6) rows x1, y1, x2, y2, score, class in one order that depends on the rows alone."""
    rows = torch.cat([detections.boxes, detections.scores[:, None], detections.labels[:, None].float()], 1)
    return rows[np.lexsort(rows.numpy().T[::-1])]

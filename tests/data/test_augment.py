"""Augmentation keeps boxes on their objects; mosaic and letterbox coordinates map back exactly."""

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from tphyolo.data.augment import NO_AUGMENT, Hyp, box_candidates
from tphyolo.data.dataset import DetectionDataset, RectBatches
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.data.labels import ImageLabels
from tphyolo.data.letterbox import letterbox, letterbox_shape, map_boxes
from tphyolo.data.mosaic import mosaic4
from tphyolo.data.scan import Record, scan_split
from tphyolo.ops.boxes import cxcywh_to_xyxy, unletterbox

# saturated colours (RGB), far from grey 114 and from each other
COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 0, 255), (0, 255, 255),
           (255, 128, 0), (128, 0, 255), (0, 128, 255), (255, 0, 128), (128, 255, 0), (0, 255, 128)]  # fmt: skip


def _painted_records(tmp_path: Path) -> list[Record]:
    """4 images with 3 solid rectangles each; class id k is painted in COLOURS[k]; one ignore region each."""
    rng = np.random.default_rng(0)
    records = []
    for i in range(4):
        h, w = (160, 220) if i % 2 else (200, 150)
        image = np.full((h, w, 3), 40, np.uint8)
        boxes = []
        for j in range(3):
            bw, bh = (int(v) for v in rng.integers(28, 50, 2))
            x, y = 5 + j * (w // 3 - 2), int(rng.integers(5, h // 2 - bh))
            bw = min(bw, w // 3 - 10)
            image[y : y + bh, x : x + bw] = COLOURS[3 * i + j][::-1]
            boxes.append((x, y, x + bw, y + bh))
        ignore = [(10, h - 45, 60, h - 5)]
        path = tmp_path / f"p{i}.png"
        cv2.imwrite(str(path), image)
        labels = ImageLabels([3 * i, 3 * i + 1, 3 * i + 2], np.array(boxes), np.array(ignore))
        records.append(Record(str(path), None, h, w, labels, "found"))
    return records


@pytest.mark.parametrize("mosaic", [1.0, 0.0])
def test_boxes_stay_on_their_objects(tmp_path, mosaic):
    hyp = Hyp(hsv_h=0, hsv_s=0, hsv_v=0, degrees=10, translate=0.1, scale=0.3, shear=3, flipud=0.5, fliplr=0.5,
              mosaic=mosaic, mixup=0.0)  # fmt: skip
    dataset = DetectionDataset(_painted_records(tmp_path), imgsz=192, augment=True, hyp=hyp, seed=1)
    checked = filled = 0
    for k in range(24):
        dataset.set_epoch(k // 4)  # a sample's draws follow (seed, epoch, index): 24 different draws
        sample = dataset[k % 4]
        image = sample.image.permute(1, 2, 0).numpy()  # (H, W, 3) RGB
        h, w = image.shape[:2]
        boxes = cxcywh_to_xyxy(sample.labels[:, 1:].numpy()) * [w, h, w, h]
        for cls, (x1, y1, x2, y2) in zip(sample.labels[:, 0].int().tolist(), boxes, strict=True):
            if x1 < 1 or y1 < 1 or x2 > w - 1 or y2 > h - 1:
                continue  # clipped by the border: its centre may be off the visible part
            colour = image[int((y1 + y2) / 2), int((x1 + x2) / 2)].astype(int)
            assert np.abs(colour - COLOURS[cls]).max() < 40, (k, cls, colour)
            checked += 1
        for x1, y1, x2, y2 in np.round(sample.ignore.numpy()).astype(int):
            if x2 - x1 > 2 and y2 - y1 > 2:
                assert (image[y1:y2, x1:x2] == 114).all()
                filled += 1
    assert checked > 40 and filled > 5


def test_ignore_mode_keep_leaves_pixels(tmp_path):
    records = _painted_records(tmp_path)
    keep = DetectionDataset(records, imgsz=224, ignore_mode="keep")[0]
    fill = DetectionDataset(records, imgsz=224, ignore_mode="fill")[0]
    x1, y1, x2, y2 = np.round(keep.ignore[0].numpy()).astype(int)
    assert (keep.image[:, y1:y2, x1:x2] == 40).all()
    assert (fill.image[:, y1:y2, x1:x2] == 114).all()
    outside = np.ones(keep.image.shape[1:], bool)
    outside[y1:y2, x1:x2] = False
    assert (keep.image[:, outside] == fill.image[:, outside]).all()


def test_mosaic_offsets_are_exact():
    rng = np.random.default_rng(3)
    tiles = [rng.integers(0, 255, (int(h), int(w), 3), dtype=np.uint8) for h, w in rng.integers(40, 130, (4, 2))]
    canvas, offsets = mosaic4(tiles, size=100, center=(90, 120))
    assert canvas.shape == (200, 200, 3)
    for tile, (dx, dy) in zip(tiles, offsets, strict=True):
        h, w = tile.shape[:2]
        ys, xs = np.mgrid[0:h, 0:w]
        inside = (xs + dx >= 0) & (xs + dx < 200) & (ys + dy >= 0) & (ys + dy < 200)
        assert inside.any()
        np.testing.assert_array_equal(canvas[ys[inside] + dy, xs[inside] + dx], tile[inside])
    assert offsets[0] == (90 - tiles[0].shape[1], 120 - tiles[0].shape[0]) and offsets[3] == (90, 120)


@pytest.mark.parametrize("shape", [(96, 160), 128, (200, 64)])
def test_letterbox_maps_and_unmaps_exactly(shape):
    image = np.zeros((75, 130, 3), np.uint8)
    image[20:40, 50:90] = 255
    out, info = letterbox(image, shape)
    box = map_boxes(np.array([[50, 20, 90, 40]], np.float32), info)
    back = unletterbox(torch.from_numpy(box), ratio=info.ratio, pad=info.pad, width=130, height=75)
    np.testing.assert_allclose(back.numpy(), [[50, 20, 90, 40]], atol=1e-4)
    x1, y1, x2, y2 = box[0]
    assert out[int(np.ceil(y1)) : int(y2), int(np.ceil(x1)) : int(x2)].min() >= 200  # the block is under the box
    assert out[int(y2) + 2 :].max() <= 114 and out[:, int(x2) + 2 :].max() <= 114  # and nothing beyond it
    left, top = info.pad
    assert (out[:, :left] == 114).all() and (out[:top] == 114).all()


def test_dataset_ratio_pad_map_back_to_original_pixels(visdrone_mini):
    scan = scan_split(visdrone_mini / "images", names=NAMES, cache=False)
    for rect in (False, True):
        dataset = DetectionDataset(scan.records[:6], imgsz=320, hyp=NO_AUGMENT, rect=RectBatches(3) if rect else None)
        for i in range(len(dataset)):
            s, r = dataset[i], dataset.records[i]
            h, w = s.image.shape[1:]
            boxes = cxcywh_to_xyxy(s.labels[:, 1:].numpy()) * [w, h, w, h]
            back = unletterbox(torch.from_numpy(boxes), ratio=s.ratio, pad=s.pad, width=r.width, height=r.height)
            np.testing.assert_allclose(back.numpy(), r.labels.boxes, atol=1e-3)
            assert s.shape0 == (r.height, r.width)
            if rect:
                assert h % 32 == 0 and w % 32 == 0 and max(h, w) == 320


def test_box_candidates_thresholds():
    before = np.array([[0, 0, 10, 10]] * 4, np.float32)
    after = np.array([[0, 0, 10, 10], [0, 0, 1.9, 10], [0, 0, 3, 3], [0, 0, 2.5, 60]], np.float32)
    assert box_candidates(before, after).tolist() == [True, False, False, False]
    wide = np.array([[0, 0, 57, 3]], np.float32)
    assert box_candidates(wide, wide).tolist() == [True] and not box_candidates(wide, wide, ar_thr=10)[0]


@pytest.mark.parametrize("perspective", [0.0, 0.0005])
def test_windowed_mosaic_warp_equals_full_canvas(perspective):
    """Building only the canvas part a warp reads gives the same pixels and boxes as the full canvas."""
    from tphyolo.data.augment import apply_warp, draw_warp, source_window

    rng = np.random.default_rng(0)
    tiles = [rng.integers(0, 255, (int(h), int(w), 3), dtype=np.uint8) for h, w in rng.integers(60, 128, (4, 2))]
    boxes = np.array([[130, 90, 160, 120], [40, 50, 70, 64]], np.float32)
    hyp = Hyp(degrees=20, shear=5, scale=0.5, translate=0.2, perspective=perspective)
    for seed in range(6):
        warp = draw_warp(np.random.default_rng(seed), hyp, in_hw=(256, 256), out_hw=(128, 128), flip_lr=seed % 2 == 1)
        full, _ = mosaic4(tiles, size=128, center=(120, 140))
        window = source_window(warp, (256, 256))
        part, _ = mosaic4(tiles, size=128, center=(120, 140), window=window)
        assert part.shape[0] * part.shape[1] <= full.shape[0] * full.shape[1]
        a, keep_a, boxes_a, _ = apply_warp(full, boxes, boxes[:0], warp)
        b, keep_b, boxes_b, _ = apply_warp(part, boxes, boxes[:0], warp, origin=window[:2])
        assert np.abs(a.astype(int) - b).max() <= 1
        assert keep_a.tolist() == keep_b.tolist() and np.array_equal(boxes_a, boxes_b)


def test_check_imgsz_keeps_multiples_rounds_others_up_and_bounds_the_size(caplog):
    from tphyolo.data.letterbox import MAX_IMGSZ, check_imgsz

    assert check_imgsz(640, 32) == 640 and not caplog.records
    assert check_imgsz(650, 32) == 672 and "using 672" in caplog.text
    for size in (0, -1, MAX_IMGSZ + 1, 2**31):
        with pytest.raises(ValueError, match=f"image size must be 1 to {MAX_IMGSZ} pixels, got {size}"):
            check_imgsz(size, 32)
    assert check_imgsz(MAX_IMGSZ, 64) == MAX_IMGSZ  # the largest size is a multiple of every stride


@pytest.mark.parametrize(("h0", "w0"), [(20, 20000), (20000, 20), (1, 5000), (3, 3)])
@pytest.mark.parametrize("size", [32, 640])
def test_letterbox_fits_any_aspect_ratio_and_maps_back(h0, w0, size):
    """A 20000 x 20 image in a 32 px square resizes to 32 x 0.032 px: the short side stays 1 pixel, and a box
    on the image maps into the letterboxed image and back through the same ratios."""
    image = np.full((h0, w0, 3), 200, np.uint8)
    for auto in (False, True):
        out, info = letterbox(image, size, stride=32, auto=auto)
        assert max(out.shape[:2]) == size and min(out.shape[:2]) >= 1 and out.shape[0] % 32 == out.shape[1] % 32 == 0
        assert (out == 200).any()  # the image is there, not only padding
        box = np.array([[0, 0, w0, h0]], np.float32)
        back = unletterbox(torch.from_numpy(map_boxes(box, info)), ratio=info.ratio, pad=info.pad, width=w0, height=h0)
        np.testing.assert_allclose(back.numpy(), box, atol=1e-3)


@pytest.mark.parametrize(("h0", "w0"), [(75, 130), (130, 75), (20, 2000), (640, 640), (33, 31)])
def test_letterbox_shape_is_the_shape_letterbox_makes(h0, w0):
    """The serving batcher groups images by `letterbox_shape` without letterboxing them: it must be the shape
    `letterbox` gives, for every mode (a copy of the geometry in the batcher could drift from it)."""
    image = np.zeros((h0, w0, 3), np.uint8)
    for new_shape, auto, scaleup in ((64, True, True), (64, False, True), ((96, 64), False, False), (640, True, False)):
        out, info = letterbox(image, new_shape, stride=32, auto=auto, scaleup=scaleup)
        resized, padded = letterbox_shape(h0, w0, new_shape, stride=32, auto=auto, scaleup=scaleup)
        assert padded == out.shape[:2]
        assert info.ratio == (resized[1] / w0, resized[0] / h0)

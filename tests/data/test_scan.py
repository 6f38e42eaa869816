"""Scanning: a corpus of bad inputs is reported file by file without crashing; the cache is keyed safely."""

import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from tphyolo.data.dataset import DetectionDataset
from tphyolo.data.files.image_io import read_image
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.data.loader import LoaderSettings, build_dataloader
from tphyolo.data.scan import fallback_cache_path, scan_split


def _jpeg(path: Path, w: int = 120, h: int = 90, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    cv2.imwrite(str(path), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))


def _bad_corpus(root: Path, label_folder: str) -> dict[str, str]:
    """images/ + label folder with one kind of trouble per file; returns stem -> label text written."""
    images, labels = root / "images", root / label_folder
    images.mkdir(parents=True)
    labels.mkdir()
    for stem in ("good", "nan", "negative", "class99", "missing", "empty", "trailing"):
        _jpeg(images / f"{stem}.jpg")
    data = (images / "good.jpg").read_bytes()
    (images / "truncated.jpg").write_bytes(data[: len(data) - 200])
    (images / "zero.jpg").write_bytes(b"")
    (images / "dir.jpg").mkdir()
    rgba = np.zeros((60, 70, 4), np.uint8)
    rgba[..., 2], rgba[..., 3] = 200, 128
    cv2.imwrite(str(images / "alpha.png"), rgba)
    cv2.imwrite(str(images / "deep.png"), np.full((40, 50, 3), 65535, np.uint16))
    cv2.imwrite(str(images / "gray.jpg"), np.full((50, 60), 90, np.uint8))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise when displayed
    Image.fromarray(np.zeros((60, 120, 3), np.uint8)).save(images / "exif.jpg", exif=exif)
    if label_folder == "annotations":
        texts = {
            "good": "10,10,20,20,1,1,0,0\n10,10,20,20,1,1,0,0\n100,70,50,50,1,4,0,0\n0,0,5,5,0,0,0,0\n",
            "nan": "10,10,nan,20,1,1,0,0\n",
            "negative": "10,10,-5,20,1,1,0,0\n",
            "class99": "10,10,5,5,1,99,0,0\n",
            "empty": "",
            "trailing": "10,10,20,20,1,2,0,0,,\n",
            "truncated": "1,1,5,5,1,3,0,0\n",
            "alpha": "1,1,5,5,1,3,0,0\n",
            "deep": "1,1,5,5,1,3,0,0\n",
            "gray": "1,1,5,5,1,3,0,0\n",
            "exif": "1,1,5,100,1,3,0,0\n",
        }
    else:
        texts = {
            "good": "0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n3 0.95 0.95 0.3 0.3\n",
            "nan": "0 0.5 nan 0.2 0.2\n",
            "negative": "0 0.5 0.5 -0.2 0.2\n",
            "class99": "99 0.5 0.5 0.2 0.2\n",
            "empty": "",
            "trailing": "1 0.5 0.5 0.2 0.2\n",
            "truncated": "2 0.5 0.5 0.1 0.1\n",
            "alpha": "2 0.5 0.5 0.1 0.1\n",
            "deep": "2 0.5 0.5 0.1 0.1\n",
            "gray": "2 0.5 0.5 0.1 0.1\n",
            "exif": "2 0.5 0.5 0.1 0.1\n",
        }
        (root / "ignore").mkdir()
        (root / "ignore" / "good.txt").write_text("0.1 0.1 0.1 0.1\n")
    for stem, text in texts.items():
        (labels / f"{stem}.txt").write_text(text)
    return texts


@pytest.mark.parametrize("label_folder", ["annotations", "labels"])
def test_bad_corpus_is_reported_without_crash(tmp_path, label_folder):
    _bad_corpus(tmp_path, label_folder)
    scan = scan_split(tmp_path / "images", names=NAMES, cache=False)
    report = scan.report
    problems = "\n".join(report.problems)
    for stem, what in [("zero.jpg", "empty file"), ("dir.jpg", "not a regular file (a directory)"),
                       ("nan.txt", "non-finite"), ("negative.txt", "negative box size"),
                       ("class99.txt", "99")]:  # fmt: skip
        assert any(stem in p and what in p for p in report.problems), f"{stem}: {what!r} not in\n{problems}"
    assert len(report.problems) == 5
    assert report.counts == {"found": 7, "missing": 1, "empty": 1, "corrupt": 5}
    assert report.images == 14
    by_name = {Path(r.im_file).name: r for r in scan.records}
    assert set(by_name) == {"good.jpg", "missing.jpg", "empty.jpg", "trailing.jpg", "truncated.jpg", "alpha.png",
                            "deep.png", "gray.jpg", "exif.jpg"}  # fmt: skip
    good = by_name["good.jpg"].labels
    assert good.classes.tolist() == [0, 3]  # duplicate removed
    assert good.boxes[1].tolist() == ([100, 70, 120, 90] if label_folder == "annotations" else [96, 72, 120, 90])
    assert len(good.ignore) == 1
    notes = "\n".join(report.notes)
    assert "duplicate" in notes and "clipped" in notes
    assert report.partial == [f"{tmp_path / 'images' / 'truncated.jpg'}: truncated JPEG (no end marker): the missing "
                              "part is filled grey by the decoder"]  # fmt: skip
    exif = by_name["exif.jpg"]
    assert (exif.height, exif.width) == (120, 60)
    assert read_image(exif.im_file).shape == (120, 60, 3)
    assert read_image(tmp_path / "images" / "deep.png").max() == 255
    assert read_image(tmp_path / "images" / "alpha.png").shape == (60, 70, 3)
    assert read_image(tmp_path / "images" / "gray.jpg").shape == (50, 60, 3)
    assert by_name["trailing.jpg"].labels.classes.tolist() == [1]
    # every usable file goes through augmentation and collation
    dataset = DetectionDataset(scan.records, imgsz=64, augment=True)
    batches = list(build_dataloader(dataset, LoaderSettings(batch_size=4, shuffle=True)))
    assert sum(len(b) for b in batches) == 9


def test_scan_cache_is_reused_refreshed_and_never_trusted_when_bad(visdrone_copy, tmp_path, monkeypatch):
    first = scan_split(visdrone_copy / "images", names=NAMES)
    cache = visdrone_copy / "annotations.cache.json"
    assert first.report.cache_path == str(cache) and not first.report.from_cache and cache.is_file()
    second = scan_split(visdrone_copy / "images", names=NAMES)
    assert second.report.from_cache
    assert [len(r.labels.boxes) for r in second.records] == [len(r.labels.boxes) for r in first.records]
    np.testing.assert_array_equal(second.records[3].labels.boxes, first.records[3].labels.boxes)
    # a changed label file changes the key: rescanned, and the new content is seen
    annotation = Path(first.records[0].label_file)
    annotation.write_text("1,1,10,10,1,1,0,0\n")
    os.utime(annotation, ns=(1, 1))
    third = scan_split(visdrone_copy / "images", names=NAMES)
    assert not third.report.from_cache
    assert third.records[0].labels.boxes.tolist() == [[1, 1, 11, 11]]
    # a tampered or garbled cache is rebuilt
    data = json.loads(cache.read_text())
    data["records"][0]["cls"] = "not a list of ints"
    cache.write_text(json.dumps(data))
    assert not scan_split(visdrone_copy / "images", names=NAMES).report.from_cache
    cache.write_bytes(b"\x80\x04 not json")
    fourth = scan_split(visdrone_copy / "images", names=NAMES)
    assert not fourth.report.from_cache and len(fourth.records) == 40
    # a read-only dataset folder gets no cache file, whoever runs the scan: the cache goes to the user cache
    # folder and is read from there next time; with nowhere to write, the scan says so and goes on
    cache.unlink()
    visdrone_copy.chmod(0o555)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    try:
        fifth = scan_split(visdrone_copy / "images", names=NAMES)
        sixth = scan_split(visdrone_copy / "images", names=NAMES)
        fallback_cache_path(cache).unlink()
        fallback_cache_path(cache).parent.chmod(0o555)
        seventh = scan_split(visdrone_copy / "images", names=NAMES)
    finally:
        visdrone_copy.chmod(0o755)
        fallback_cache_path(cache).parent.chmod(0o755)
    assert not cache.exists()
    assert fifth.report.cache_path == str(fallback_cache_path(cache))
    assert fallback_cache_path(cache).parent == tmp_path / "user-cache" / "tphyolo" / "scans"
    assert sixth.report.from_cache and len(sixth.records) == 40
    assert seventh.report.cache_path is None and len(seventh.records) == 40
    assert any("scan cache not saved" in n and "read-only" in n for n in seventh.report.notes)


def test_symlinked_image_folders_are_followed_once_and_unused_labels_are_named(tmp_path):
    root = tmp_path / "set"
    images, labels = root / "images", root / "labels"
    (images / "a").mkdir(parents=True)
    (labels / "a").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    _jpeg(images / "a" / "x.jpg")
    _jpeg(outside / "y.jpg", seed=1)
    (labels / "a" / "x.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    (labels / "a" / "gone.txt").write_text("0 0.5 0.5 0.2 0.2\n")  # its image was deleted
    os.symlink(outside, images / "linked")  # a folder kept elsewhere
    os.symlink(images, images / "a" / "up")  # a link back up the tree: a loop
    scan = scan_split(images, cache=False)
    files = sorted(Path(r.im_file).relative_to(images).as_posix() for r in scan.records)
    assert files == ["a/x.jpg", "linked/y.jpg"]  # the linked folder once, the loop not at all
    assert [n for n in scan.report.notes if "without an image" in n] == [
        f"{labels / 'a' / 'gone.txt'}: label file without an image in the split; not used"
    ]

"""The label-format registry: every registered format writes the labels of a painted scene and the scan reads
the same labels back; unknown names are refused with the known ones listed."""

import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from tphyolo.data.builtin.synthetic import NAMES, render_scene
from tphyolo.data.convert import convert_visdrone
from tphyolo.data.formats import FORMATS, get_format
from tphyolo.data.formats.base import LabeledImage, LabelFormat, sibling_file
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.data.labels import ImageLabels
from tphyolo.data.scan import scan_split

SIZE = 192


def _painted_split(root: Path) -> list[LabeledImage]:
    """`root/images/scene.jpg` (a synthetic scene, padded to 256 x 192 so that width and height differ; its
    objects plus one box with fractional corners) and `root/images/sub/background.jpg` (no objects)."""
    image, labels, _ = render_scene(np.random.default_rng(1), SIZE)
    image = np.pad(image, ((0, 64), (0, 0), (0, 0)))
    assert len(labels.classes) >= 5 and len(labels.ignore) >= 1  # the round trip covers objects and regions
    labels = ImageLabels(
        np.append(labels.classes, 5), np.vstack([labels.boxes, [[10.5, 20.25, 40.75, 60.5]]]), labels.ignore
    )
    (root / "images" / "sub").mkdir(parents=True)
    scene, background = root / "images" / "scene.jpg", root / "images" / "sub" / "background.jpg"
    cv2.imwrite(str(scene), image)
    cv2.imwrite(str(background), image[:100, :150])
    return [LabeledImage(scene, SIZE + 64, SIZE, labels), LabeledImage(background, 100, 150, ImageLabels())]


def _assert_same_labels(scanned: dict[str, ImageLabels], written: list[LabeledImage]) -> None:
    assert set(scanned) == {im.image.name for im in written}
    for im in written:
        got = scanned[im.image.name]
        np.testing.assert_array_equal(got.classes, im.labels.classes)
        np.testing.assert_allclose(got.boxes, im.labels.boxes, atol=0.01)
        np.testing.assert_allclose(got.ignore, im.labels.ignore, atol=0.01)


def test_registry_names_its_formats_by_their_own_names():
    assert {"visdrone", "yolo", "coco"} <= set(FORMATS)
    for name, fmt in FORMATS.items():
        assert isinstance(fmt, LabelFormat) and fmt.name == name and get_format(name) is fmt


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_round_trips_the_labels_of_a_painted_image(tmp_path, name):
    written = _painted_split(tmp_path)
    files = FORMATS[name].write(written, names=NAMES)
    assert files and all(f.is_file() for f in files)
    scan = scan_split(tmp_path / "images", names=NAMES, cache=False)
    assert scan.report.formats == [name]
    assert scan.report.counts == {"found": 1, "missing": 0, "empty": 1, "corrupt": 0}
    assert not scan.report.problems and not scan.report.notes
    _assert_same_labels({Path(r.im_file).name: r.labels for r in scan.records}, written)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_convert_writes_every_registered_format(tmp_path, name):
    written = _painted_split(tmp_path / "src")
    names = VISDRONE_NAMES  # classes of the painted scene are within VisDrone's 10
    FORMATS["visdrone"].write(written, names=names)
    data_yaml = convert_visdrone(tmp_path / "src", tmp_path / "out", to=name, log=lambda line: None)
    scan = scan_split(data_yaml.parent / "images", names=names, cache=False)
    assert scan.report.formats == [name] and not scan.report.problems
    _assert_same_labels({Path(r.im_file).name: r.labels for r in scan.records}, written)


def test_unknown_format_is_refused_with_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=re.escape(f"unknown label format 'voc'; known: {sorted(FORMATS)}")):
        get_format("voc")
    with pytest.raises(ValueError, match="known: .*'yolo'"):
        convert_visdrone(tmp_path, tmp_path / "out", to="voc")


def test_a_split_without_label_folders_is_background_in_no_format(tmp_path):
    _painted_split(tmp_path)
    scan = scan_split(tmp_path / "images", names=NAMES, cache=True)
    assert scan.report.formats == [] and scan.report.counts["missing"] == 2
    assert all(len(r.labels.classes) == 0 and r.label_file is None for r in scan.records)
    # the cache of a split without labels sits where the first per-image format would keep its labels
    assert scan.report.cache_path == str(tmp_path / "annotations.cache.json")


class _CsvFormat(LabelFormat):
    """A format made up for the test: `boxes/STEM.csv` beside `images/`, one `class,x1,y1,x2,y2` row per object."""

    name = "csv"

    def label_file(self, image: Path) -> Path | None:
        return sibling_file(image, "boxes", ".csv")

    def read(self, entry, *, width, height, num_classes):
        rows = [[float(v) for v in line.split(",")] for line in entry.label.read_text().splitlines()]
        rows = np.array(rows).reshape(-1, 5)
        return ImageLabels(rows[:, 0], rows[:, 1:]), []

    def write(self, images, *, names):
        for im in images:
            path = self.label_file(im.image)
            path.parent.mkdir(parents=True, exist_ok=True)
            rows = np.column_stack([im.labels.classes, im.labels.boxes])
            path.write_text("".join(",".join(f"{v:.3f}" for v in row) + "\n" for row in rows))
        return [self.label_file(im.image) for im in images]


def test_a_new_format_is_one_class_and_one_registry_entry(tmp_path, monkeypatch):
    monkeypatch.setitem(FORMATS, "csv", _CsvFormat())
    written = _painted_split(tmp_path / "src")
    FORMATS["visdrone"].write(written, names=VISDRONE_NAMES)
    data_yaml = convert_visdrone(tmp_path / "src", tmp_path / "out", to="csv", log=lambda line: None)
    scan = scan_split(data_yaml.parent / "images", names=VISDRONE_NAMES, cache=True)
    assert scan.report.formats == ["csv"] and not scan.report.problems
    assert scan.report.cache_path == str(tmp_path / "out" / "boxes.cache.json")
    without_ignore = [LabeledImage(im.image, im.height, im.width, ImageLabels(im.labels.classes, im.labels.boxes))
                      for im in written]  # fmt: skip
    _assert_same_labels({Path(r.im_file).name: r.labels for r in scan.records}, without_ignore)

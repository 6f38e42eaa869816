"""The label-format registry: every registered format writes the labels of a painted scene and the scan reads
the same labels back; unknown names are refused with the known ones listed."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from tphyolo.data.convert import convert_visdrone
from tphyolo.data.formats import FORMATS, get_format
from tphyolo.data.formats.base import LabeledImage, LabelFormat
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.data.labels import ImageLabels
from tphyolo.data.scan import scan_split
from tphyolo.data.synthetic import NAMES, render_scene

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
    assert set(FORMATS) == {"visdrone", "yolo", "coco"}
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
    with pytest.raises(ValueError, match=r"unknown label format 'voc'; known: \['coco', 'visdrone', 'yolo'\]"):
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

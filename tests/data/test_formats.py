"""Label formats against the real VisDrone files: exact counts, and pixel boxes through every format."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from tphyolo.data.convert import convert_visdrone
from tphyolo.data.dataset_config import load_data_config, parse_data_yaml
from tphyolo.data.files.image_io import verify_image
from tphyolo.data.formats.coco import CocoImage, coco_dict, load_coco
from tphyolo.data.formats.visdrone import NAMES, format_visdrone, parse_visdrone
from tphyolo.data.formats.yolo import format_yolo, parse_yolo
from tphyolo.data.labels import LabelError
from tphyolo.data.scan import scan_split


def _plain_counts(annotation_dir: Path) -> tuple[Counter, int]:
    classes, ignore = Counter(), 0
    for f in annotation_dir.glob("*.txt"):
        for line in f.read_text().splitlines():
            fields = [v for v in line.split(",") if v.strip()]
            if not fields:
                continue
            category = int(fields[5])
            if category == 0:
                ignore += 1
            elif category <= 10:
                classes[category - 1] += 1
    return classes, ignore


def test_visdrone_counts_equal_plain_line_count(visdrone_mini):
    expected_classes, expected_ignore = _plain_counts(visdrone_mini / "annotations")
    scan = scan_split(visdrone_mini / "images", names=NAMES, cache=False)
    classes = Counter(np.concatenate([r.labels.classes for r in scan.records]).tolist())
    assert classes == expected_classes
    assert sum(len(r.labels.ignore) for r in scan.records) == expected_ignore
    # the numbers of the dataset's own sanity summary
    assert [classes[i] for i in range(10)] == [483, 238, 33, 1091, 144, 112, 26, 53, 49, 302]
    assert expected_ignore == 35
    assert scan.report.counts == {"found": 40, "missing": 0, "empty": 0, "corrupt": 0}
    assert scan.report.formats == ["visdrone"]


def test_visdrone_line_parsing(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("10,20,30,40,1,4,0,1,\n\n5,6,7,8,0,0,0,0\n1,1,2,2,0,11,0,0\n")
    labels = parse_visdrone(f)
    assert labels.classes.tolist() == [3]
    assert labels.boxes.tolist() == [[10, 20, 40, 60]]
    assert labels.ignore.tolist() == [[5, 6, 12, 14]]
    f.write_text("10,20,30,40,1,12,0,0\n")
    with pytest.raises(LabelError, match=r"a.txt:1: category 12"):
        parse_visdrone(f)


def test_boxes_survive_every_format(visdrone_mini, tmp_path):
    """VisDrone -> YOLO -> VisDrone -> COCO -> back, in pixels, for every real annotation file."""
    coco_images, originals = [], []
    for annotation in sorted((visdrone_mini / "annotations").glob("*.txt")):
        image = visdrone_mini / "images" / f"{annotation.stem}.jpg"
        info = verify_image(image)
        original = parse_visdrone(annotation)
        label_text, ignore_text = format_yolo(original, width=info.width, height=info.height)
        (tmp_path / "l.txt").write_text(label_text)
        (tmp_path / "i.txt").write_text(ignore_text)
        via_yolo = parse_yolo(tmp_path / "l.txt", tmp_path / "i.txt", width=info.width, height=info.height)
        np.testing.assert_array_equal(via_yolo.classes, original.classes)
        np.testing.assert_allclose(via_yolo.boxes, original.boxes, atol=0.01)
        np.testing.assert_allclose(via_yolo.ignore, original.ignore, atol=0.01)
        (tmp_path / "v.txt").write_text(format_visdrone(via_yolo))
        via_visdrone = parse_visdrone(tmp_path / "v.txt")
        np.testing.assert_allclose(via_visdrone.boxes, original.boxes, atol=0.01)
        np.testing.assert_allclose(via_visdrone.ignore, original.ignore, atol=0.01)
        coco_images.append(CocoImage(image.name, info.width, info.height, via_visdrone))
        originals.append(original)
    (tmp_path / "coco.json").write_text(json.dumps(coco_dict(coco_images, list(NAMES))))
    names, loaded = load_coco(tmp_path / "coco.json")
    assert names == list(NAMES)
    for im, original in zip(coco_images, originals, strict=True):
        back = loaded[im.file_name].labels
        np.testing.assert_array_equal(back.classes, original.classes)
        np.testing.assert_allclose(back.boxes, original.boxes, atol=0.01)
        np.testing.assert_allclose(back.ignore, original.ignore, atol=0.01)


def test_convert_visdrone_then_scan_equals_original(visdrone_copy, tmp_path):
    data_yaml = convert_visdrone(visdrone_copy, tmp_path / "yolo", log=lambda line: None)
    out = tmp_path / "yolo"
    assert data_yaml == out / "data.yaml"
    assert len(list((out / "labels").glob("*.txt"))) == 40
    assert len(list((out / "ignore").glob("*.txt"))) == 16  # images with ignore regions
    first = sorted((out / "labels").glob("*.txt"))[0].read_text().splitlines()[0].split()
    assert len(first) == 5 and 0 <= int(first[0]) < 10
    config = load_data_config(data_yaml)
    converted = {Path(r.im_file).name: r for r in scan_split(config.train, names=config.names, cache=False).records}
    original = scan_split(visdrone_copy / "images", names=NAMES, cache=False)
    assert scan_split(config.train, names=config.names, cache=False).report.formats == ["yolo"]
    for r in original.records:
        c = converted[Path(r.im_file).name]
        np.testing.assert_array_equal(c.labels.classes, r.labels.classes)
        np.testing.assert_allclose(c.labels.boxes, r.labels.boxes, atol=0.01)
        np.testing.assert_allclose(c.labels.ignore, r.labels.ignore, atol=0.01)


def test_coco_json_split_with_crowd_as_ignore(tmp_path):
    import cv2

    (tmp_path / "images").mkdir()
    cv2.imwrite(str(tmp_path / "images" / "a.jpg"), np.zeros((50, 80, 3), np.uint8))
    coco = {
        "images": [{"id": 7, "file_name": "a.jpg", "width": 80, "height": 50}],
        "annotations": [
            {"id": 1, "image_id": 7, "category_id": 3, "bbox": [1, 2, 10, 20], "iscrowd": 0},
            {"id": 2, "image_id": 7, "category_id": 3, "bbox": [40, 5, 30, 30], "iscrowd": 1},
        ],
        "categories": [{"id": 3, "name": "car"}, {"id": 9, "name": "bus"}],
    }
    (tmp_path / "instances.json").write_text(json.dumps(coco))
    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "instances_val.json").write_text(json.dumps(coco))
    sources = (tmp_path / "instances.json", tmp_path / "images", tmp_path / "images")  # named, or detected
    for source in sources:
        scan = scan_split(source, names=("car", "bus"))
        (r,) = scan.records
        assert scan.report.formats == ["coco"]
        assert r.labels.classes.tolist() == [0]
        assert r.labels.boxes.tolist() == [[1, 2, 11, 22]]
        assert r.labels.ignore.tolist() == [[40, 5, 70, 35]]
    assert (tmp_path / "instances.cache.json").is_file()
    assert (tmp_path / "annotations" / "instances_val.cache.json").is_file()


def test_data_yaml_paths_and_names(tmp_path):
    (tmp_path / "ds" / "a" / "images").mkdir(parents=True)
    (tmp_path / "ds" / "list.txt").write_text("a/images/x.jpg\n")
    cfg_file = tmp_path / "cfg" / "d.yaml"
    cfg_file.parent.mkdir()
    cfg_file.write_text(yaml.safe_dump({"path": "../ds", "train": ["a/images", "list.txt"], "val": "a/images",
                                        "names": {0: "x", 1: "y"}, "nc": 2}))  # fmt: skip
    cfg = parse_data_yaml(cfg_file)
    assert cfg.root == (tmp_path / "ds").resolve()
    assert cfg.train == (cfg.root / "a/images", cfg.root / "list.txt")
    assert cfg.names == ("x", "y") and cfg.nc == 2 and cfg.test == ()
    cfg_file.write_text(yaml.safe_dump({"train": "a", "val": "a", "names": ["x"], "nc": 3}))
    with pytest.raises(ValueError, match="nc=3 but 1 names"):
        parse_data_yaml(cfg_file)
    with pytest.raises(
        FileNotFoundError, match=r"'visdrone' is not downloaded: looked for .*VisDrone2019-DET-train.*get it"
    ):
        load_data_config("visdrone", datasets_dir=tmp_path)
    (tmp_path / "VisDrone" / "VisDrone2019-DET-val" / "images").mkdir(parents=True)
    visdrone = load_data_config("visdrone", datasets_dir=tmp_path)
    assert visdrone.names == NAMES
    assert visdrone.train == (tmp_path.resolve() / "VisDrone" / "VisDrone2019-DET-train" / "images",)
    assert visdrone.test[0].parent.name == "VisDrone2019-DET-test-dev"


def test_visdrone_classes_and_image_suffixes_have_one_definition(tmp_path):
    import cv2

    from tphyolo.data.dataset_config import builtin_data_yaml
    from tphyolo.data.files.image_io import IMAGE_SUFFIXES, is_image_name
    from tphyolo.data.formats.visdrone import NUM_CLASSES
    from tphyolo.evaluation import detection_files as eval_cmd
    from tphyolo.metrics import visdrone as protocol

    packaged = yaml.safe_load(builtin_data_yaml("visdrone").read_text())
    assert tuple(packaged["names"][i] for i in range(packaged["nc"])) == NAMES and len(NAMES) == NUM_CLASSES == 10
    # the protocol, and its VisDrone -> COCO conversion, score categories 1..NUM_CLASSES
    assert protocol.NAMES is NAMES and list(range(1, NUM_CLASSES + 1)) == list(protocol.CLASSES)
    # `tphyolo eval` looks for images with the suffixes every other reader accepts, in a fixed order
    assert isinstance(IMAGE_SUFFIXES, tuple) and all(is_image_name(Path(f"a{s.upper()}")) for s in IMAGE_SUFFIXES)
    cv2.imwrite(str(tmp_path / "frame.ppm"), np.zeros((30, 40, 3), np.uint8))
    assert eval_cmd.image_size(eval_cmd.required_image(tmp_path, "frame")) == (30, 40)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("iscrowd", "0", "annotations[0]: 'iscrowd' must be 0 or 1, got '0'"),  # a truthy string: never a crowd
        ("iscrowd", 2, "annotations[0]: 'iscrowd' must be 0 or 1, got 2"),
        ("image_id", [1], "annotations[0]: 'image_id' must be an int or a string, got [1]"),
        ("image_id", {"id": 1}, "annotations[0]: 'image_id' must be an int or a string"),
        ("category_id", None, "annotations[0]: 'category_id' must be an int, got None"),
    ],
)
def test_a_coco_field_of_the_wrong_type_is_named_with_file_and_record(tmp_path, field, value, message):
    annotation = {"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "iscrowd": 0} | {field: value}
    data = {"images": [{"id": 1, "file_name": "a.jpg", "width": 9, "height": 9}], "annotations": [annotation],
            "categories": [{"id": 1, "name": "car"}]}  # fmt: skip
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(data))
    with pytest.raises(LabelError) as error:
        load_coco(path)
    assert str(error.value).startswith(f"{path}: {message}")
    annotation |= {"iscrowd": True}  # json's true is a crowd region
    path.write_text(json.dumps(data | {"annotations": [annotation | {"image_id": 1, "category_id": 1}]}))
    assert load_coco(path)[1]["a.jpg"].labels.ignore.tolist() == [[1, 2, 4, 6]]

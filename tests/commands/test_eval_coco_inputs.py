"""Malformed COCO inputs: `tphyolo eval --protocol coco` and the COCO label format answer in one line that
names the file and the entry."""

import json

import pytest

from tphyolo.cli import main
from tphyolo.data.formats.coco import load_coco
from tphyolo.data.labels import LabelError

GT = {
    "images": [{"id": 1, "file_name": "a.jpg", "width": 100, "height": 80}, {"id": 2, "file_name": "b.jpg",
               "width": 100, "height": 80}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 3, "bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0}],
    "categories": [{"id": 3, "name": "car"}],
}  # fmt: skip
GOOD = {"image_id": 1, "category_id": 3, "bbox": [10, 10, 20, 20], "score": 0.9}


def _eval(tmp_path, capsys, gt, detections) -> str:
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(detections))
    argv = ["eval", "--gt", str(tmp_path / "gt.json"), "--pred", str(tmp_path / "dt.json"), "--protocol", "coco"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    ("detections", "message"),
    [
        ([{k: v for k, v in GOOD.items() if k != "score"}], "detection 0: lacks ['score']"),
        ([GOOD, {k: v for k, v in GOOD.items() if k != "bbox"}], "detection 1: lacks ['bbox']"),
        ([{**GOOD, "bbox": "10,10,20,20"}], "detection 0: bbox must be 4 finite numbers"),
        ([{**GOOD, "bbox": [10, 10, 20]}], "detection 0: bbox must be 4 finite numbers"),
        ([{**GOOD, "bbox": [10, 10, "20", 20]}], "detection 0: bbox must be 4 finite numbers"),
        ([{**GOOD, "bbox": [10, 10, -2, 20]}], "detection 0: negative box size -2x20"),
        ([{**GOOD, "image_id": 9}], "detection 0: image_id 9 is not an image of the dataset"),
        ([{**GOOD, "image_id": "1"}], "detection 0: image_id '1' is not an image of the dataset"),
        ([{**GOOD, "category_id": 4}], "detection 0: category_id 4 is not a category of the dataset"),
        ([GOOD, {**GOOD, "image_id": [1]}], "detection 1: 'image_id' must be int or str, got [1]"),
        ([{**GOOD, "category_id": 3.0}], "detection 0: 'category_id' must be int, got 3.0"),
        ([{**GOOD, "score": "high"}], "detection 0: score must be a finite number"),
        ([[1, 3, [10, 10, 20, 20], 0.9]], "detection 0: must be a mapping"),
        ({"detections": [GOOD]}, "COCO results must be a list of detections, got dict"),
    ],
)
def test_malformed_results_name_the_file_and_the_detection(tmp_path, capsys, detections, message):
    err = _eval(tmp_path, capsys, GT, detections)
    assert err.startswith(f"tphyolo eval: error: {tmp_path / 'dt.json'}: ") and message in err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"annotations": [{**GT["annotations"][0], "bbox": "10 10 20 20"}]}, "annotations[0]: bbox must be 4"),
        ({"annotations": [{**GT["annotations"][0], "image_id": 7}]}, "annotations[0]: unknown image_id 7"),
        ({"annotations": [{**GT["annotations"][0], "category_id": 1}]}, "annotations[0]: unknown category_id 1"),
        ({"annotations": [{**GT["annotations"][0], "image_id": [1]}]},
         "annotations[0]: 'image_id' must be an int or a string, got [1]"),
        ({"annotations": [{**GT["annotations"][0], "category_id": "3"}]},
         "annotations[0]: 'category_id' must be an int, got '3'"),
        ({"annotations": [{**GT["annotations"][0], "iscrowd": "0"}]},
         "annotations[0]: 'iscrowd' must be 0 or 1, got '0'"),
        ({"annotations": [{**GT["annotations"][0], "area": "400"}]}, "annotations[0]: 'area' must be a finite number"),
        ({"annotations": [GT["annotations"][0], {**GT["annotations"][0], "bbox": [1, 1, 2, 2]}]},
         "annotations[1]: 'id' must be a unique int or string, got 1"),
        ({"categories": [{"id": 3, "name": ["car"]}]}, "categories[0]: 'name' must be a string, got ['car']"),
        ({"images": [{"id": 1}, {"id": 1}]}, "images[1]: 'id' must be a unique int or string, got 1"),
        ({"images": [{"id": [1]}]}, "images[0]: 'id' must be a unique int or string"),
        ({"images": "a.jpg"}, "'images' must be a list, got str"),
        ({"categories": [{"name": "car"}]}, "categories[0]: 'id' must be a unique int"),
    ],
)
def test_malformed_ground_truth_names_the_file_and_the_entry(tmp_path, capsys, change, message):
    err = _eval(tmp_path, capsys, GT | change, [GOOD])
    assert err.startswith(f"tphyolo eval: error: {tmp_path / 'gt.json'}: ") and message in err


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ({"id": 2, "file_name": "b.jpg", "height": 80}, "images[1] (b.jpg): 'width' must be a whole number >= 1"),
        ({"id": 2, "file_name": "b.jpg", "width": 0, "height": 80}, "'width' must be a whole number >= 1, got 0"),
        ({"id": 2, "file_name": "b.jpg", "width": "100", "height": 80}, "'width' must be a whole number"),
        ({"id": 2, "file_name": "a.jpg", "width": 100, "height": 80}, "images[1]: file_name 'a.jpg' repeats images[0]"),
        ({"id": 2, "file_name": "../../etc/b.jpg", "width": 1, "height": 1}, "must be a path inside the images"),
        ({"id": 2, "file_name": "/etc/b.jpg", "width": 1, "height": 1}, "must be a path inside the images folder"),
        ({"id": 2, "width": 100, "height": 80}, "images[1]: 'file_name' must be a path inside the images folder"),
    ],
)
def test_a_coco_label_file_with_a_bad_image_entry_is_named(tmp_path, image, message):
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(GT | {"images": [GT["images"][0], image]}))
    with pytest.raises(LabelError, match="^" + str(path)) as error:
        load_coco(path)
    assert message in str(error.value)


def test_a_good_coco_label_file_is_read(tmp_path):
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(GT))
    names, images = load_coco(path)
    assert names == ["car"] and sorted(images) == ["a.jpg", "b.jpg"]
    assert images["a.jpg"].labels.boxes.tolist() == [[10, 10, 30, 30]] and images["b.jpg"].width == 100

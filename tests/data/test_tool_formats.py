"""The exports of labelling tools as label formats: CVAT for images 1.1 and Label Studio tasks, each read from a
file written as the tool's own export writes it (the documented schema, by hand), labels mapped to classes by
the data set's names, ignore regions kept; bad files named in one line; and the round trip of `tphyolo predict
--save-cvat --save-label-studio` back through the scan."""

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from tests.predict.geotiffs import random_checkpoint

from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.formats.cvat import load_cvat
from tphyolo.data.formats.label_studio import load_label_studio
from tphyolo.data.labels import ImageLabels, LabelError, sanitize
from tphyolo.data.scan import scan_split

NAMES = ("bus", "car")  # the data set's order: the files name "car" first


def _images(folder: Path, sizes: dict[str, tuple[int, int]]) -> None:
    for name, (width, height) in sizes.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(folder / name), np.full((height, width, 3), 90, np.uint8))


def _by_name(scan) -> dict[str, tuple]:
    return {Path(r.im_file).name: (r.labels.classes.tolist(), r.labels.boxes.tolist(), r.labels.ignore.tolist())
            for r in scan.records}  # fmt: skip


CVAT_EXPORT = """<?xml version="1.0" encoding="utf-8"?>
<annotations>
  <version>1.1</version>
  <meta>
    <task>
      <id>7</id><name>flight 12</name><size>2</size><mode>annotation</mode>
      <labels>
        <label><name>car</name><color>#fa3253</color><type>any</type>
          <attributes><attribute><name>parked</name><mutable>False</mutable><input_type>checkbox</input_type>
          <default_value>false</default_value><values>false\ntrue</values></attribute></attributes></label>
        <label><name>bus</name><color>#33ddff</color><type>any</type><attributes></attributes></label>
        <label><name>ignored regions</name><color>#000000</color><type>any</type><attributes></attributes></label>
      </labels>
    </task>
    <dumped>2026-12-01 10:00:00.000000+00:00</dumped>
  </meta>
  <image id="0" name="a.jpg" width="120" height="80">
    <box label="car" source="manual" occluded="0" xtl="10.50" ytl="20.00" xbr="30.25" ybr="35.00" z_order="0">
      <attribute name="parked">true</attribute>
    </box>
    <box label="bus" source="auto" occluded="1" xtl="40.00" ytl="10.00" xbr="100.00" ybr="50.00" z_order="1">
    </box>
    <box label="car" source="manual" occluded="0" xtl="60.00" ytl="60.00" xbr="80.00" ybr="70.00" z_order="0"
      rotation="90.0"></box>
    <polygon label="car" source="manual" occluded="0" points="1.00,2.00;11.00,2.00;6.00,12.00" z_order="0">
    </polygon>
    <points label="car" source="manual" occluded="0" points="5.00,5.00" z_order="0"></points>
    <box label="ignored regions" source="manual" occluded="0" xtl="0.00" ytl="70.00" xbr="20.00" ybr="80.00"
      z_order="0"></box>
  </image>
  <image id="1" name="sub/b.jpg" width="64" height="48">
  </image>
</annotations>
"""


def test_a_cvat_export_reads_with_names_mapped_and_ignore_regions(tmp_path):
    """CVAT's export zip unpacked: annotations.xml beside images/ (read as `images/` with `../annotations.xml`).
    Before, no format read it: every image was background."""
    _images(tmp_path / "images", {"a.jpg": (120, 80), "sub/b.jpg": (64, 48)})
    (tmp_path / "annotations.xml").write_text(CVAT_EXPORT, encoding="utf-8")
    scan = scan_split(tmp_path / "images", names=NAMES, cache=False)
    assert scan.report.formats == ["cvat"] and scan.report.counts["found"] == 1 and not scan.report.problems
    classes, boxes, ignore = _by_name(scan)["a.jpg"]
    assert classes == [1, 0, 1, 1]  # car, bus, turned car, polygon car (points are not boxes)
    np.testing.assert_allclose(boxes, [[10.5, 20, 30.25, 35], [40, 10, 100, 50], [65, 55, 75, 75], [1, 2, 11, 12]])
    assert ignore == [[0, 70, 20, 80]]
    assert _by_name(scan)["b.jpg"][0] == []
    names_of_file = scan_split(tmp_path / "images", cache=False).names  # no data yaml: the file's labels
    assert names_of_file == ("car", "bus")


LABEL_STUDIO_EXPORT = [
    {"id": 1, "data": {"image": "/data/upload/3/1a2b3c4d-a.jpg"}, "annotations": [
        {"id": 5, "was_cancelled": True, "result": []},
        {"id": 6, "completed_by": 1, "was_cancelled": False, "ground_truth": False, "lead_time": 12.5, "result": [
            {"id": "r1", "type": "rectanglelabels", "from_name": "label", "to_name": "image", "original_width": 200,
             "original_height": 100, "image_rotation": 0, "origin": "manual",
             "value": {"x": 10, "y": 20, "width": 25, "height": 30, "rotation": 0, "rectanglelabels": ["car"]}},
            {"id": "r2", "type": "rectanglelabels", "from_name": "label", "to_name": "image", "original_width": 200,
             "original_height": 100, "image_rotation": 0, "origin": "prediction-changed",
             "value": {"x": 50, "y": 10, "width": 10, "height": 20, "rotation": 90, "rectanglelabels": ["bus"]}},
            {"id": "r3", "type": "rectanglelabels", "from_name": "label", "to_name": "image", "original_width": 200,
             "original_height": 100, "value": {"x": 0, "y": 80, "width": 20, "height": 20, "rotation": 0,
                                               "rectanglelabels": ["Ignore"]}},
            {"id": "r4", "type": "choices", "from_name": "quality", "to_name": "image",
             "value": {"choices": ["sharp"]}}]}],
     "predictions": [{"model_version": "best.pt", "score": 0.5, "result": []}]},
    {"id": 2, "data": {"image": "/data/local-files/?d=flight/sub/b.jpg"}, "annotations": [{"result": []}]},
    {"id": 3, "data": {"image": "s3://bucket/c.jpg"}, "annotations": [], "predictions": []},
]


def test_a_label_studio_export_reads_its_last_annotation_by_name(tmp_path):
    """Label Studio's JSON export given as the split source: uploaded and local-files images found under its
    images/ folder, the annotation not cancelled, percent boxes in pixels, a task nobody annotated left out.
    Before, the json was read as a COCO file and refused."""
    _images(tmp_path / "images", {"a.jpg": (200, 100), "sub/b.jpg": (64, 48), "c.jpg": (64, 48)})
    export = tmp_path / "project-3-at-2026-12-01.json"
    export.write_text(json.dumps(LABEL_STUDIO_EXPORT), encoding="utf-8")
    (tmp_path / "data.yaml").write_text(f"train: {export.name}\nval: {export.name}\nnames: [bus, car]\n")
    data = load_data_config(tmp_path / "data.yaml")
    scan = scan_split(data.train, names=data.names, cache=False)
    assert scan.report.formats == ["label-studio"] and not scan.report.problems
    found = _by_name(scan)
    assert set(found) == {"a.jpg", "b.jpg"}  # c.jpg: not annotated
    classes, boxes, ignore = found["a.jpg"]
    assert classes == [1, 0]
    np.testing.assert_allclose(boxes, [[20, 20, 70, 50], [80, 10, 100, 30]], atol=1e-4)  # turned about (x, y)
    np.testing.assert_allclose(ignore, [[0, 80, 40, 100]], atol=1e-4)


def test_a_coco_json_is_still_read_as_coco(tmp_path):
    _images(tmp_path / "images", {"a.jpg": (64, 48)})
    coco = {"images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48}], "categories": [
        {"id": 1, "name": "bus"}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}]}
    (tmp_path / "annotations.json").write_text(json.dumps(coco))
    assert scan_split(tmp_path / "annotations.json", cache=False).report.formats == ["coco"]


@pytest.mark.parametrize(("text", "message"), [
    ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">]><annotations>&lol;</annotations>',
     "declares a DTD or entities"),
    ("<annotations><image name='a.jpg'><box label='car' xtl='1' ytl='x' xbr='3' ybr='4'/></image>",
     "not well-formed XML"),
    ("<annotations><image name='a.jpg'><box label='car' xtl='1' ytl='x' xbr='3' ybr='4'/></image></annotations>",
     "image 'a.jpg': box 0: 'ytl' must be a number"),
    ("<dataset/>", "has an <annotations> root"),
])  # fmt: skip
def test_a_bad_cvat_file_is_one_line_naming_it(tmp_path, text, message):
    path = tmp_path / "annotations.xml"
    path.write_text(text)
    with pytest.raises(LabelError) as error:
        load_cvat(path)
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value) and "\n" not in str(error.value)


def test_a_label_the_data_set_lacks_is_named(tmp_path):
    _images(tmp_path / "images", {"a.jpg": (120, 80), "sub/b.jpg": (64, 48)})
    (tmp_path / "annotations.xml").write_text(CVAT_EXPORT, encoding="utf-8")
    scan = scan_split(tmp_path / "images", names=("bus", "truck"), cache=False)
    assert scan.report.problems == [f"{tmp_path / 'annotations.xml'}: image 'a.jpg': label 'car' is not a class of "
                                    "the data set (bus, truck); name it in the data yaml's names"]  # fmt: skip


def test_predicted_boxes_come_back_through_cvat_and_label_studio(tmp_path):
    """predict --save-cvat --save-label-studio, then each file read by the scan as the tool gives it back (CVAT:
    as written; Label Studio: the predictions accepted as the task's annotation): the boxes predict wrote to
    predictions.json, class by class."""
    from tphyolo.cli import main

    root = tmp_path / "flight"
    (root / "images").mkdir(parents=True)
    for i, (name, shape) in enumerate((("a.jpg", (64, 96, 3)), ("b.png", (64, 64, 3)))):  # texture: boxes found
        cv2.imwrite(str(root / "images" / name), np.random.default_rng(i).integers(0, 255, shape, dtype=np.uint8))
    weights = random_checkpoint(tmp_path)
    main(["predict", "--weights", str(weights), "--source", str(root / "images"), "--img", "128", "--conf", "0.001",
          "--runtime", "pytorch", "--device", "cpu", "--save-json", "--save-cvat", "--save-label-studio",
          "--no-save-img", "--project", str(tmp_path), "--name", "run"])  # fmt: skip
    run = tmp_path / "run"
    expected: dict[str, list] = {}
    for record in json.loads((run / "predictions.json").read_text()):  # image ids 1, 2: a, b
        x, y, w, h = record["bbox"]
        expected.setdefault("ab"[record["image_id"] - 1], []).append((record["category_id"], [x, y, x + w, y + h]))
    assert sum(map(len, expected.values())) > 10
    cvat = root / "annotations.xml"
    cvat.write_text((run / "annotations.xml").read_text())
    tasks = json.loads((run / "label-studio.json").read_text())
    assert tasks[0]["predictions"][0]["model_version"] == "tiny.pt"
    assert all("score" in r for t in tasks for r in t["predictions"][0]["result"])
    for task in tasks:  # what Label Studio exports once a person accepts the predictions
        task["annotations"] = [{"result": task.pop("predictions")[0]["result"]}]
    (root / "tasks.json").write_text(json.dumps(tasks))
    for source, fmt, atol in ((root / "images", "cvat", 0.006), (root / "tasks.json", "label-studio", 1e-3)):
        scan = scan_split(source, names=("car", "bus"), cache=False)
        assert scan.report.formats == [fmt] and len(scan.records) == 2 and not scan.report.problems
        for record in scan.records:  # the scan drops what it drops from any format (boxes of no area at an edge)
            rows = expected.get(Path(record.im_file).stem, [])
            kept, _ = sanitize(ImageLabels([c for c, _ in rows], [b for _, b in rows]), width=record.width,
                               height=record.height)  # fmt: skip
            _assert_same_rows(record.labels, kept, atol=atol)
    assert load_label_studio(root / "tasks.json")[0].ref == "a.jpg"


def _assert_same_rows(got: ImageLabels, want: ImageLabels, *, atol: float) -> None:
    """Each object of `got` matches one of `want` of its class within `atol` px, one to one."""
    assert len(got.classes) == len(want.classes)
    left = list(zip(want.classes.tolist(), want.boxes.tolist(), strict=True))
    for c, box in zip(got.classes.tolist(), got.boxes.tolist(), strict=True):
        match = next(i for i, (wc, wb) in enumerate(left) if wc == c and np.allclose(wb, box, rtol=0, atol=atol))
        left.pop(match)


def test_the_tools_files_are_refused_where_one_process_cannot_write_them(tmp_path, capsys):
    """A raster runs tile by tile into GeoJSON: --save-cvat is refused in one line, before any run folder."""
    from tests.helpers import exit_code
    from tests.predict.geotiffs import scene, write_geotiff

    tif = write_geotiff(tmp_path / "ortho.tif", scene(64, 64, []))
    weights = random_checkpoint(tmp_path)
    argv = ["predict", "--weights", str(weights), "--source", str(tif), "--save-cvat", "--project", str(tmp_path),
            "--name", "run"]  # fmt: skip
    assert exit_code(argv) == 2
    assert "--save-cvat write(s) one file of a whole run of images in one process: not with a raster" in \
        capsys.readouterr().err  # fmt: skip
    assert not (tmp_path / "run").exists()

"""`predictions.json` and the COCO ground truth of a VisDrone folder share integer image and category ids, so
COCO tools score predictions directly: ids per image match, and the ground truth as predictions scores 1.0."""

import json
import shutil

import numpy as np
import pytest
import torch
from tests.helpers import save_model_checkpoint

from tphyolo.cli import main
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.evaluation.detection_files import read_visdrone_rows
from tphyolo.metrics.coco import coco_image_ids
from tphyolo.models import build_model
from tphyolo.ops.detections import Detections
from tphyolo.predict.outputs import OutputSettings
from tphyolo.predict.sources import iter_frames, resolve_source
from tphyolo.predict.writers import PredictionWriter, coco_gt_image_ids


@pytest.fixture(scope="module")
def visdrone(visdrone_mini, tmp_path_factory):
    """Three VisDrone images with their annotations, in `images/` and `annotations/`."""
    root = tmp_path_factory.mktemp("visdrone")
    for folder in ("images", "annotations"):
        (root / folder).mkdir()
    for image in sorted((visdrone_mini / "images").glob("*.jpg"))[3:6]:
        shutil.copy(image, root / "images" / image.name)
        shutil.copy(visdrone_mini / "annotations" / f"{image.stem}.txt", root / "annotations")
    return root


@pytest.fixture(scope="module")
def coco_gt(visdrone, tmp_path_factory):
    path = tmp_path_factory.mktemp("gt") / "gt.json"
    assert main(["eval", "--gt", str(visdrone / "annotations"), "--save-gt", str(path)]) == 0  # no --pred: write only
    return path


def test_image_ids_are_numbers_of_numeric_names_else_positions():
    assert coco_image_ids(["000000000139", "000000000285"]) == [139, 285]  # COCO's own file names
    assert coco_image_ids(["0000001_02999_d_0000005", "b"]) == [1, 2]
    assert coco_image_ids(["01", "1"]) == [1, 2]  # the same number twice: positions
    assert coco_image_ids([]) == []


def test_the_saved_ground_truth_is_the_visdrone_folder_with_integer_ids(visdrone, coco_gt):
    gt = json.loads(coco_gt.read_text())
    stems = sorted(p.stem for p in (visdrone / "annotations").glob("*.txt"))
    assert [(im["id"], im["file_name"]) for im in gt["images"]] == [(i + 1, f"{s}.jpg") for i, s in enumerate(stems)]
    assert all(isinstance(im["height"], int) and im["width"] > 0 for im in gt["images"])
    assert [c["id"] for c in gt["categories"]] == list(range(len(NAMES)))
    first = read_visdrone_rows(visdrone / "annotations" / f"{stems[0]}.txt")
    objects = first[(first[:, 5] >= 1) & (first[:, 5] <= len(NAMES))]
    mine = [a for a in gt["annotations"] if a["image_id"] == 1 and not a["iscrowd"]]
    assert len(mine) == int((objects[:, 4] != 0).sum()) > 0
    assert {a["category_id"] for a in mine} == {int(c) - 1 for c in objects[objects[:, 4] != 0, 5]}


@pytest.mark.slow
def test_predict_json_ids_match_the_ground_truth_image_by_image(visdrone, coco_gt, tmp_path):
    torch.manual_seed(0)
    weights = save_model_checkpoint(tmp_path / "tiny.pt", build_model("yolov5n", names=list(NAMES)), list(NAMES))
    argv = ["predict", "--weights", str(weights), "--source", str(visdrone / "images"), "--img", "64"]
    argv += ["--conf", "0.001", "--device", "cpu", "--project", str(tmp_path), "--name", "p", "--no-save-img"]
    assert main(argv + ["--save-json", "--save-visdrone"]) == 0
    records = json.loads((tmp_path / "p" / "predictions.json").read_text())
    gt = json.loads(coco_gt.read_text())
    assert records and all(type(r["image_id"]) is int and type(r["category_id"]) is int for r in records)
    for image in gt["images"]:
        stem = image["file_name"].rsplit(".", 1)[0]
        rows = read_visdrone_rows(tmp_path / "p" / "visdrone" / f"{stem}.txt")
        mine = [r for r in records if r["image_id"] == image["id"]]
        assert len(mine) == len(rows) > 0
        np.testing.assert_allclose([r["bbox"] for r in mine], rows[:, :4], atol=0.01)
        assert [r["category_id"] for r in mine] == (rows[:, 5] - 1).astype(int).tolist()


def _ground_truth_as_predictions(visdrone, out) -> None:
    """predictions.json written by the predict writer from each image's own objects (score 1)."""
    writer = PredictionWriter(out, names=list(NAMES), outputs=OutputSettings(save_img=False, save_json=True))
    for frame in iter_frames(resolve_source(visdrone / "images")):
        rows = read_visdrone_rows(visdrone / "annotations" / f"{frame.path.stem}.txt")
        rows = rows[(rows[:, 5] >= 1) & (rows[:, 5] <= len(NAMES)) & (rows[:, 4] != 0)]
        boxes = torch.from_numpy(np.concatenate([rows[:, :2], rows[:, :2] + rows[:, 2:4]], axis=1)).float()
        labels = torch.from_numpy(rows[:, 5] - 1).long()
        writer.write(frame, Detections(boxes, torch.ones(len(rows)), labels))
    writer.close()


def test_the_ground_truth_as_predictions_scores_one_through_the_coco_protocol(visdrone, coco_gt, tmp_path):
    _ground_truth_as_predictions(visdrone, tmp_path / "oracle")
    predictions, scores = tmp_path / "oracle" / "predictions.json", tmp_path / "scores.json"
    argv = ["eval", "--gt", str(coco_gt), "--pred", str(predictions), "--protocol", "coco", "--json", str(scores)]
    assert main(argv) == 0
    numbers = json.loads(scores.read_text())
    assert numbers["AP"] == pytest.approx(100.0) and numbers["AP50"] == pytest.approx(100.0)
    assert numbers["AR500"] == pytest.approx(100.0)


@pytest.mark.parametrize("tool", ["faster_coco_eval", "pycocotools"])
def test_coco_tools_read_the_two_files_as_they_are(visdrone, coco_gt, tmp_path, tool):
    pytest.importorskip(tool)
    _ground_truth_as_predictions(visdrone, tmp_path / "oracle")
    predictions = str(tmp_path / "oracle" / "predictions.json")
    if tool == "faster_coco_eval":
        from faster_coco_eval import COCO
        from faster_coco_eval import COCOeval_faster as COCOeval
    else:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    ground_truth = COCO(str(coco_gt))
    evaluation = COCOeval(ground_truth, ground_truth.loadRes(predictions), "bbox")
    evaluation.params.maxDets = [1, 10, 500]  # a VisDrone image holds up to hundreds of objects
    evaluation.evaluate()
    evaluation.accumulate()
    precision = np.asarray(evaluation.eval["precision"])[:, :, :, 0, -1]  # (IoU, recall, class) at maxDets 500
    assert precision[precision > -1].size > 0 and precision[precision > -1].mean() == pytest.approx(1.0)  # AP


def test_save_gt_and_pred_misuse_are_one_line_errors(visdrone, coco_gt, tmp_path, capsys):
    assert main(["eval", "--gt", str(coco_gt), "--save-gt", str(tmp_path / "again.json")]) == 2
    assert "is one" in capsys.readouterr().err and not (tmp_path / "again.json").exists()
    assert main(["eval", "--gt", str(visdrone / "annotations")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--pred is required" in err
    assert main(["eval", "--gt", str(tmp_path / "none"), "--save-gt", str(tmp_path / "gt.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "none is not a folder" in err


def test_coco_gt_numbers_a_subset_of_images_by_their_ground_truth_ids(visdrone, coco_gt, tmp_path):
    gt = json.loads(coco_gt.read_text())
    writer = PredictionWriter(tmp_path / "out", names=list(NAMES),
                              outputs=OutputSettings(save_img=False, save_json=True),
                              image_ids=coco_gt_image_ids(coco_gt))  # fmt: skip
    last = sorted((visdrone / "images").glob("*.jpg"))[-1]
    (frame,) = iter_frames(resolve_source(last))
    box = Detections(torch.tensor([[1.0, 2.0, 11.0, 22.0]]), torch.tensor([0.5]), torch.tensor([3]))
    writer.write(frame, box)
    writer.close()
    (record,) = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert record["image_id"] == gt["images"][-1]["id"] == 3 and record["category_id"] == 3  # not 1: its own id
    stranger = tmp_path / "stranger.jpg"
    shutil.copy(last, stranger)
    with pytest.raises(ValueError, match="no image named 'stranger'"):
        writer.write(next(iter_frames([stranger])), box)


def test_coco_gt_misuse_is_refused_before_predicting(visdrone, coco_gt, tmp_path, capsys):
    argv = ["predict", "--weights", str(tmp_path / "never-loaded.pt"), "--device", "cpu", "--coco-gt", str(coco_gt)]
    assert main(argv + ["--source", str(visdrone / "images")]) == 2
    assert "add --save-json" in capsys.readouterr().err
    (tmp_path / "other").mkdir()
    shutil.copy(next((visdrone / "images").glob("*.jpg")), tmp_path / "other" / "renamed.jpg")
    assert main(argv + ["--source", str(tmp_path / "other"), "--save-json"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no image named 'renamed'" in err
    (tmp_path / "bad.json").write_text('{"images": [{"id": "1", "file_name": "a.jpg"}]}')
    argv[-1] = str(tmp_path / "bad.json")
    assert main(argv + ["--source", str(visdrone / "images"), "--save-json"]) == 2
    assert "image 0 needs an integer 'id'" in capsys.readouterr().err

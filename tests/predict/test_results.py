"""What the predictor returns: Results with names, source and shape; plot/save/crop/to_dict; every input kind."""

import dataclasses
import json

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

from tphyolo.models import build_model
from tphyolo.ops.detections import Detections
from tphyolo.predict.draw import class_colour
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.results import Results, crop_boxes

NAMES = ["car", "van", "bus"]


@pytest.fixture(scope="module")
def predictor():
    torch.manual_seed(0)
    return Predictor(build_model("yolov5n", names=NAMES).eval(), imgsz=96, conf=0.001, device="cpu", batch=2)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(7)
    for name, shape in (("a.jpg", (64, 96, 3)), ("b.png", (80, 60, 3))):
        cv2.imwrite(str(folder / name), rng.integers(0, 255, shape, dtype=np.uint8))
    return folder


def _scene() -> Results:
    image = np.zeros((64, 96, 3), np.uint8)
    image[10:30, 20:50] = 200
    boxes = torch.tensor([[20.0, 10.0, 50.0, 30.0], [60.5, 40.2, 70.0, 63.9], [90.0, 0.0, 120.0, 10.0]])
    return Results(boxes, torch.tensor([0.9, 0.5, 0.3]), torch.tensor([1, 2, 0]), names=tuple(NAMES),
                   shape=(64, 96), image=image)  # fmt: skip


def _palette_pixels(image: np.ndarray, label: int) -> int:
    return int((image == np.array(class_colour(label), np.uint8)).all(axis=2).sum())


def test_file_results_carry_names_source_and_shape_and_read_their_image_again(predictor, images):
    results = predictor(images)
    assert [r.path for r in results] == [images / "a.jpg", images / "b.png"]
    assert [r.shape for r in results] == [(64, 96), (80, 60)]
    for result in results:
        assert isinstance(result, Detections) and len(result) > 0  # the old API still holds
        assert result.names == tuple(NAMES) and result.image is None  # files are not held in memory
        np.testing.assert_array_equal(result.load_image(), cv2.imread(str(result.path)))
    first_frame, first = next(predictor.stream(images))
    assert first.image is first_frame.image and first.path == images / "a.jpg"


def test_every_input_kind_gives_the_same_detections(predictor, images):
    bgr = cv2.imread(str(images / "a.jpg"))
    rgb = np.ascontiguousarray(bgr[:, :, ::-1])
    chw = torch.from_numpy(rgb).permute(2, 0, 1)  # (3, H, W) uint8 RGB
    expected = predictor(images / "a.jpg")[0].rows()
    inputs = {
        "bgr array, PIL, uint8 tensor": predictor([bgr, Image.fromarray(rgb), chw]),
        "rgb array": predictor(rgb, rgb=True),
        "float batch": predictor(torch.stack([chw, chw]).float() / 255),
    }
    for kind, results in inputs.items():
        for result in results:
            torch.testing.assert_close(result.rows(), expected, msg=kind)
            assert result.shape == (64, 96)
    assert len(inputs["bgr array, PIL, uint8 tensor"]) == 3 and len(inputs["float batch"]) == 2
    assert inputs["rgb array"][0].path is None and inputs["rgb array"][0].image is not None
    swapped = predictor(rgb)[0].rows()  # RGB given as BGR: another image, other scores
    assert swapped.shape != expected.shape or not torch.equal(swapped, expected)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (torch.zeros(1, 64, 64), "RGB tensor"),
        (torch.full((3, 8, 8), 2.0), r"\[0, 1\]"),
        (np.zeros((8, 8, 3), np.float32), "uint8"),
        ([np.zeros((8, 8, 3), np.uint8), "a.jpg"], "either images or paths"),
    ],
)
def test_unreadable_inputs_are_refused_naming_the_problem(predictor, bad, message):
    with pytest.raises(ValueError, match=message):
        predictor(bad)


def test_plot_draws_labels_scores_and_line_width_as_asked():
    scene = _scene()
    plain = scene.plot()
    assert plain.shape == scene.image.shape and not np.array_equal(plain, scene.image)
    assert _palette_pixels(scene.plot(labels=False), 1) < _palette_pixels(plain, 1)  # no label background
    assert _palette_pixels(scene.plot(line_width=4, labels=False), 1) > 2 * _palette_pixels(
        scene.plot(line_width=1, labels=False), 1
    )
    assert not np.array_equal(scene.plot(conf=False), plain)  # "van" is shorter than "van 0.90"
    np.testing.assert_array_equal(scene.image[12, 22], [200, 200, 200])  # the kept image is not drawn on


def test_save_writes_the_plot(tmp_path):
    scene = _scene()
    path = scene.save(tmp_path / "deep" / "scene.png", conf=False)
    np.testing.assert_array_equal(cv2.imread(str(path)), scene.plot(conf=False))


def test_crops_are_the_box_regions_clipped_to_the_image(tmp_path):
    scene = _scene()
    crops = scene.crop()
    assert [c.shape[:2] for c in crops] == [(20, 30), (24, 10), (10, 6)]  # rounded outwards, clipped at x = 96
    np.testing.assert_array_equal(crops[0], scene.image[10:30, 20:50])
    assert crop_boxes(scene.image, scene, pad=2)[0].shape[:2] == (24, 34)
    outside = Detections(torch.tensor([[100.0, 70.0, 120.0, 90.0]]), torch.tensor([0.5]), torch.tensor([0]))
    assert crop_boxes(scene.image, outside)[0].shape == (0, 0, 3)
    written = scene.save_crops(tmp_path, stem="scene")
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["van/scene_0.jpg", "bus/scene_1.jpg",
                                                                      "car/scene_2.jpg"]  # fmt: skip
    assert cv2.imread(str(written[0])).shape[:2] == (20, 30)


def test_to_dict_and_to_json_hold_the_detections_in_original_pixels():
    scene = _scene()
    record = scene.to_dict()
    assert record["path"] is None and record["shape"] == [64, 96] and record["frame"] == 0
    assert [d["name"] for d in record["detections"]] == ["van", "bus", "car"]
    assert [d["class"] for d in record["detections"]] == [1, 2, 0]
    np.testing.assert_allclose([d["box"] for d in record["detections"]], scene.boxes.numpy())
    np.testing.assert_allclose([d["score"] for d in record["detections"]], [0.9, 0.5, 0.3], rtol=1e-6)
    assert json.loads(scene.to_json(indent=2)) == json.loads(json.dumps(record))


def test_classes_without_a_name_are_written_by_id_in_records_and_crop_folders(tmp_path):
    scene = dataclasses.replace(_scene(), names=("car", "van"))  # the model has a class the names lack
    assert [d["name"] for d in scene.to_dict()["detections"]] == ["van", "2", "car"]
    written = scene.save_crops(tmp_path, stem="scene")
    assert [p.parent.name for p in written] == ["van", "2", "car"]


def test_results_are_exported_lazily():
    import tphyolo

    assert tphyolo.Results is Results

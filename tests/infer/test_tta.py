"""Test-time augmentation: the identity pass is plain inference; flips and scales map boxes back exactly."""

import numpy as np
import pytest
import torch

from tphyolo.infer.tta import augment, unaugment
from tphyolo.infer.tta_config import PLAIN, TTAConfig
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_model("yolov5n", num_classes=3).eval()


@pytest.fixture(scope="module")
def image():
    rng = np.random.default_rng(1)
    canvas = rng.integers(0, 60, (64, 128, 3), dtype=np.uint8)
    canvas[10:40, 20:50] = 230  # a bright square on dark noise, off-centre so mirroring matters
    return canvas


def _sorted_rows(d):
    rows = torch.cat([d.boxes, d.scores[:, None], d.labels[:, None].float()], dim=1)
    order = np.lexsort(rows.round(decimals=3).numpy().T[::-1])
    return rows[torch.from_numpy(order)]


def test_identity_pass_leaves_input_and_output_unchanged():
    x = torch.rand(2, 3, 64, 96)
    xa, geometry = augment(x, scale=1.0, flip="none", stride=32)
    assert torch.equal(xa, x)
    prediction = torch.rand(2, 50, 8) * 64
    assert torch.equal(unaugment(prediction, geometry), prediction)


def test_tta_with_identity_pass_equals_plain_inference(model, image):
    plain = Predictor(model, imgsz=128, conf=0.001, device="cpu")(image)[0]
    tta = Predictor(model, imgsz=128, conf=0.001, device="cpu", tta=TTAConfig(scales=(1.0,), flips=("none",)))
    identity = tta(image)[0]
    assert len(plain) > 0
    assert torch.equal(plain.boxes, identity.boxes) and torch.equal(plain.scores, identity.scores)
    assert torch.equal(plain.labels, identity.labels)
    assert tta.tta == PLAIN


def test_flip_maps_centres_to_mirrored_coordinates():
    x = torch.rand(1, 3, 64, 96)
    xa, geometry = augment(x, scale=1.0, flip="lr", stride=32)
    assert torch.equal(xa, x.flip(-1))
    prediction = torch.tensor([[[10.0, 20.0, 6.0, 8.0, 0.9, 0.8]]])  # cx, cy, w, h on the flipped input
    back = unaugment(prediction, geometry)
    assert back[0, 0, :4].tolist() == [86.0, 20.0, 6.0, 8.0]
    _, geometry_ud = augment(x, scale=1.0, flip="ud", stride=32)
    assert unaugment(prediction, geometry_ud)[0, 0, :4].tolist() == [10.0, 44.0, 6.0, 8.0]


def test_scaled_pass_is_padded_to_stride_and_mapped_back():
    x = torch.rand(1, 3, 64, 96)
    xa, geometry = augment(x, scale=0.83, flip="none", stride=32)
    assert xa.shape[2] % 32 == 0 and xa.shape[3] % 32 == 0
    assert geometry.ratio == (80 / 96, 53 / 64)
    prediction = torch.tensor([[[40.0, 26.5, 20.0, 10.6, 0.9, 0.8]]])
    back = unaugment(prediction, geometry)[0, 0, :4]
    torch.testing.assert_close(back, torch.tensor([48.0, 32.0, 24.0, 12.8]))


def test_left_right_pass_equals_mirrored_inference_on_the_flipped_image(model, image):
    flipped_pass = Predictor(model, imgsz=128, conf=0.001, device="cpu", tta=TTAConfig(scales=(1.0,), flips=("lr",)))
    got = flipped_pass(image)[0]
    on_flipped = Predictor(model, imgsz=128, conf=0.001, device="cpu")(np.ascontiguousarray(image[:, ::-1]))[0]
    width = image.shape[1]
    mirrored = on_flipped.boxes[:, [2, 1, 0, 3]] * torch.tensor([-1.0, 1.0, -1.0, 1.0]) + torch.tensor(
        [width, 0.0, width, 0.0]
    )
    expected = type(got)(mirrored, on_flipped.scores, on_flipped.labels)
    assert len(got) == len(expected) > 0
    torch.testing.assert_close(_sorted_rows(got), _sorted_rows(expected), atol=1e-3, rtol=0)


def test_full_tta_keeps_boxes_inside_the_image(model, image):
    predictor = Predictor(model, imgsz=128, conf=0.001, device="cpu", tta=True)
    assert len(predictor.tta.passes()) == 8
    d = predictor(image)[0]
    assert len(d) > 0
    assert (d.boxes[:, [0, 2]] >= 0).all() and (d.boxes[:, [0, 2]] <= image.shape[1]).all()
    assert (d.boxes[:, [1, 3]] >= 0).all() and (d.boxes[:, [1, 3]] <= image.shape[0]).all()
    assert (d.scores[:-1] >= d.scores[1:]).all()


def test_bad_tta_settings_are_rejected():
    with pytest.raises(ValueError, match="flips"):
        TTAConfig(flips=("diagonal",))
    with pytest.raises(ValueError, match="scales"):
        TTAConfig(scales=(0.0,))

"""A request's options -> its settings, within the bounds of predict's flags (one source of truth), and a 422
naming the option otherwise."""

from __future__ import annotations

import pytest

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import SliceConfig
from tphyolo.serve.options import Settings, answer_format, request_settings
from tphyolo.serve.problems import RequestProblem

DEFAULTS = Settings(InferenceConfig(imgsz=640, conf=0.25))


def settings(defaults: Settings = DEFAULTS, *, has_classifier: bool = False, **options) -> Settings:
    return request_settings(
        {k: [v] for k, v in options.items()}, defaults, num_classes=3, has_classifier=has_classifier
    )


def test_options_replace_the_defaults():
    got = settings(conf="0.5", iou="0.3", max_det="10", classes="0,2", imgsz="320", augment="true")
    assert got.config == InferenceConfig(imgsz=320, conf=0.5, iou=0.3, max_det=10, classes=(0, 2), augment=True)
    assert got.slicing is None and got.classifier is False
    assert settings() == DEFAULTS


def test_slicing_options():
    assert settings(slice="256", overlap="0.5").slicing == SliceConfig(256, 0.5)
    sliced = Settings(DEFAULTS.config, SliceConfig(512))
    assert settings(sliced, slice="0").slicing is None
    assert settings(sliced, overlap="0.1").slicing == SliceConfig(512, 0.1)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"conf": "2"}, ["conf:", "[0, 1]", "2"]),
        ({"conf": "nan"}, ["conf:", "[0, 1]"]),
        ({"iou": "high"}, ["iou:", "a number"]),
        ({"max_det": "0"}, ["max_det:", "[1, 2147483647]"]),
        ({"max_det": "99999999999999999999"}, ["max_det:", "[1, 2147483647]"]),
        ({"slice": "99999999999999999999"}, ["slice:", "2147483647"]),
        ({"classes": "99999999999999999999"}, ["classes:", "2147483647"]),
        ({"imgsz": "100000"}, ["imgsz:", "11584"]),
        ({"classes": "1,5"}, ["classes:", "got 5", "3 classes"]),
        ({"classes": "-1"}, ["classes:", "[0, 2147483647]"]),
        ({"slice": "10"}, ["slice:", "[32, 2147483647]"]),
        ({"slice": "64", "overlap": "0.95"}, ["overlap:", "[0, 0.9]"]),
        ({"overlap": "0.3"}, ["overlap:", "slice=SIZE"]),
        ({"augment": "maybe"}, ["augment:", "true or false"]),
        ({"classifier": "true"}, ["classifier:", "--classifier"]),
        ({"size": "3"}, ["size:", "unknown option"]),
    ],
)
def test_a_bad_option_is_a_422_naming_it(options, words):
    with pytest.raises(RequestProblem) as caught:
        settings(**options)
    assert caught.value.status == 422
    for word in words:
        assert word in caught.value.message


def test_answer_format():
    assert answer_format({}) == "json" and answer_format({"format": ["coco"]}) == "coco"
    with pytest.raises(RequestProblem, match="format"):
        answer_format({"format": ["xml"]})

"""A request's options (query string or multipart form fields) -> the settings its images are detected with.

The options are the per-image settings of `tphyolo predict`, under the names of InferenceConfig's fields:
`conf`, `iou`, `max_det`, `classes` (comma-separated or repeated), `imgsz`, `augment`; and `slice` (window
pixels, 0 for none), `overlap`, `classifier` (true/false). Each is checked against the bounds of its
setting (`InferenceConfig`'s flags, `SliceConfig`'s), the one source of truth predict's flags use too, and an
integer option is at most LARGEST_INTEGER besides (what the tensor libraries take as an index); an option left
out keeps the service's default (its command-line flags). `format` (json|coco) picks the answer. What the
settings cost with the request's images is checked once they are decoded (`tphyolo.serve.cost`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tphyolo.flags import Bounds, flag_spec
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import OVERLAP_BOUNDS, SIZE_BOUNDS, SliceConfig
from tphyolo.serve.problems import bad_option

ANSWER_FORMATS = ("json", "coco")
LARGEST_INTEGER = 2**31 - 1
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_INFERENCE_OPTIONS = {"conf": float, "iou": float, "max_det": int, "imgsz": int}  # InferenceConfig fields
OPTIONS = (*_INFERENCE_OPTIONS, "classes", "augment", "slice", "overlap", "classifier", "format")


@dataclass(frozen=True)
class Settings:
    """How the images of a request are detected: `config`, `slicing` (None: whole images), `classifier`
    (re-label with the loaded crop classifier). Hashable: requests with equal settings may share a batch."""

    config: InferenceConfig
    slicing: SliceConfig | None = None
    classifier: bool = False


def _bounds(name: str) -> Bounds | None:
    field = next(f for f in dataclasses.fields(InferenceConfig) if f.name == name)
    spec = flag_spec(field)
    return spec.bounds if spec is not None else None


def _number(name: str, text: str, kind: type, bounds: Bounds | None) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise bad_option(name, f"expected {'an integer' if kind is int else 'a number'}, got {text!r:.40}") from None
    if kind is int and (bounds is None or bounds.high is None):
        low = bounds.low if bounds is not None else -LARGEST_INTEGER
        bounds = Bounds(low, LARGEST_INTEGER, low_open=bounds is not None and bounds.low_open)
    if bounds is not None and value not in bounds:
        raise bad_option(name, f"must be {bounds}, got {text:.40}")
    return value


def _switch(name: str, text: str) -> bool:
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise bad_option(name, f"expected true or false, got {text!r:.40}")


def _classes(texts: Sequence[str]) -> tuple[int, ...]:
    words = [word for text in texts for word in text.split(",") if word.strip()]
    return tuple(int(_number("classes", word.strip(), int, _bounds("classes"))) for word in words)


def answer_format(options: Mapping[str, Sequence[str]]) -> str:
    """The `format` option: "json" (default) or "coco"; 422 otherwise."""
    value = (options.get("format") or ["json"])[-1]
    if value not in ANSWER_FORMATS:
        raise bad_option("format", f"expected one of {', '.join(ANSWER_FORMATS)}, got {value!r:.40}")
    return value


def request_settings(
    options: Mapping[str, Sequence[str]], defaults: Settings, *, num_classes: int, has_classifier: bool
) -> Settings:
    """`defaults` with the request's `options` (name -> its values, the last one counts) applied. Raises a
    422 RequestProblem naming the first option that is unknown, malformed, out of bounds or has no effect."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise bad_option(unknown[0], f"unknown option; known: {', '.join(OPTIONS)}")
    last = {name: values[-1] for name, values in options.items() if values}
    fields: dict[str, object] = {
        name: _number(name, last[name], kind, _bounds(name))
        for name, kind in _INFERENCE_OPTIONS.items()
        if name in last
    }
    if "classes" in options:
        fields["classes"] = _classes(options["classes"]) or None
    if "augment" in last:
        fields["augment"] = _switch("augment", last["augment"])
    try:
        config = replace(defaults.config, **fields)
    except ValueError as error:  # a combination the config refuses: an input too large for TTA's scales
        raise bad_option("imgsz" if "imgsz" in fields else "augment", str(error)) from None
    unknown = [c for c in config.classes or () if c >= num_classes]
    if unknown:
        raise bad_option("classes", f"the model has {num_classes} classes (ids 0..{num_classes - 1}), got {unknown[0]}")
    return Settings(config, _slicing(last, defaults.slicing), _classifier(last, defaults, has_classifier))


def _slicing(last: Mapping[str, str], default: SliceConfig | None) -> SliceConfig | None:
    if "slice" not in last:
        if "overlap" in last and default is None:
            raise bad_option("overlap", "sets sliced inference up; add slice=SIZE or drop it")
        if "overlap" not in last or default is None:
            return default
        return replace(default, overlap=_number("overlap", last["overlap"], float, OVERLAP_BOUNDS))
    if last["slice"] == "0":
        return None
    size = int(_number("slice", last["slice"], int, SIZE_BOUNDS))
    overlap = last.get("overlap")
    base = default or SliceConfig(size)
    if overlap is None:
        return replace(base, size=size)
    return replace(base, size=size, overlap=_number("overlap", overlap, float, OVERLAP_BOUNDS))


def _classifier(last: Mapping[str, str], defaults: Settings, has_classifier: bool) -> bool:
    if "classifier" not in last:
        return defaults.classifier
    wanted = _switch("classifier", last["classifier"])
    if wanted and not has_classifier:
        raise bad_option("classifier", "no crop classifier is loaded (start the service with --classifier)")
    return wanted

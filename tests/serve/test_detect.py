"""POST /v1/detect on a real uvicorn: the answers equal `Predictor`'s on the same pixels, each caller gets its
own under concurrency, and the formats and routes around it say what is loaded and counted."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families
from tests.serve.conftest import NAMES, SETTINGS

from tphyolo.infer.config import InferenceConfig
from tphyolo.predict.predictor import Predictor
from tphyolo.serve import Client

MEDIA = {".png": "image/png", ".jpg": "image/jpeg"}


@pytest.fixture(scope="module")
def predicted(tiny_weights, image_files):
    """The oracle: `tphyolo predict`'s Predictor on the same files, one at a time (batch 1, as predict runs)."""
    return Predictor(str(tiny_weights), device="cpu", **SETTINGS)(image_files)


def _post(url: str, path, **params) -> httpx.Response:
    return httpx.post(f"{url}/v1/detect", content=path.read_bytes(), params=params,
                      headers={"Content-Type": MEDIA[path.suffix]}, timeout=60)  # fmt: skip


def test_detect_gives_the_boxes_of_predict(server, image_files, predicted):
    with Client(server) as client:
        for path, expected in zip(image_files[:3], predicted[:3], strict=True):
            result = client.detect(path)
            assert len(expected) > 0
            assert result.shape == expected.shape and result.names == tuple(NAMES)
            assert torch.equal(result.boxes, expected.boxes)
            assert torch.equal(result.scores, expected.scores)
            assert torch.equal(result.labels, expected.labels)


def test_an_array_sent_gives_the_boxes_of_predict_on_it(server, tiny_weights, image_files):
    import cv2

    image = cv2.imread(str(image_files[1]))
    expected = Predictor(str(tiny_weights), device="cpu", **SETTINGS)(image)[0]
    with Client(server) as client:
        result = client.detect(image)
    assert result.image is image and len(expected) > 0
    assert torch.equal(result.boxes, expected.boxes) and torch.equal(result.scores, expected.scores)


def test_concurrent_callers_each_get_their_own_answer(server, image_files, predicted):
    """Distinct images of two shapes sent by 8 callers in a shuffled order, twice over: each answer is its
    image's (batched passes round differently from single ones: compared within float tolerance)."""
    order = [i for i in range(len(image_files)) for _ in range(2)]
    random.Random(3).shuffle(order)
    with Client(server) as client, ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: client.detect(image_files[i]), order))
    for i, result in zip(order, results, strict=True):
        expected = predicted[i]
        assert result.shape == expected.shape
        assert len(result) == len(expected) > 0
        torch.testing.assert_close(result.boxes, expected.boxes, atol=1e-2, rtol=0)
        torch.testing.assert_close(result.scores, expected.scores, atol=1e-4, rtol=0)


def test_multipart_files_and_form_options(server, image_files, predicted):
    files = [("file", (p.name, p.read_bytes(), MEDIA[p.suffix])) for p in image_files[:2]]
    answer = httpx.post(f"{server}/v1/detect", files=files, data={"conf": "0.2"}, timeout=60).json()
    assert [entry["file"] for entry in answer["images"]] == [p.name for p in image_files[:2]]
    for entry, expected in zip(answer["images"], predicted[:2], strict=True):
        kept = expected.scores >= 0.2
        assert entry["scores"] == pytest.approx(expected.scores[kept].tolist(), abs=1e-4)
        assert entry["names"] == [NAMES[c] for c in expected.labels[kept].tolist()]
        assert (entry["width"], entry["height"]) == (expected.shape[1], expected.shape[0])
    assert set(answer["timings"]) == {"queue_ms", "inference_ms", "total_ms"}
    assert len(answer["model"]["hash"]) == 16 and answer["model"]["name"] == "tiny.pt"


def test_coco_format(server, image_files, predicted):
    records = _post(server, image_files[0], format="coco", max_det=5).json()
    expected = predicted[0]
    assert [r["category_id"] for r in records] == expected.labels[:5].tolist()
    x1, y1, x2, y2 = expected.boxes[0].tolist()
    assert records[0]["bbox"] == pytest.approx([x1, y1, x2 - x1, y2 - y1], abs=1e-2)
    assert {r["image_id"] for r in records} == {0}


def test_request_options_override_the_defaults(server, image_files, tiny_weights):
    path = image_files[2]
    answer = _post(server, path, conf="0.003", iou="0.3", classes="0,2", max_det="7").json()["images"][0]
    expected = Predictor(str(tiny_weights), device="cpu", imgsz=SETTINGS["imgsz"], conf=0.003, iou=0.3,
                         classes=(0, 2), max_det=7)([path])[0]  # fmt: skip
    assert answer["boxes"] == expected.boxes.tolist()
    assert set(answer["classes"]) <= {0, 2} and len(answer["classes"]) == len(expected) > 0


def test_models_health_and_page(server):
    models = httpx.get(f"{server}/v1/models").json()["models"][0]
    assert models["classes"] == NAMES and models["imgsz"] == SETTINGS["imgsz"]
    assert models["backend"] == "openvino"  # a checkpoint on the CPU: compiled by default
    assert models["defaults"]["conf"] == SETTINGS["conf"]
    health = httpx.get(f"{server}/healthz").json()
    assert health["status"] == "ok" and health["worker"]["pid"] > 0
    page = httpx.get(f"{server}/")
    assert page.status_code == 200 and 'type="file"' in page.text and "v1/detect" in page.text
    line = (f'<p id="model">model <b>tiny.pt</b> (openvino, fp32 on cpu, {SETTINGS["imgsz"]} px), 3 classes: '
            "car, van, bus</p>")  # fmt: skip
    assert line in page.text  # what is loaded, as /v1/models says it
    assert httpx.get(f"{server}/docs").status_code == 200


def test_the_page_says_while_the_model_loads_and_why_it_did_not():
    from tphyolo.serve.app import RELOADS, model_line, page_html

    loading = page_html(None)
    assert f'data-state="loading" data-reload-s="2" data-reloads="{RELOADS}">the model is loading' in loading
    assert "<!-- model -->" not in loading and 'id="file"' in loading
    failed = model_line(None, failure="best.pt: <not a checkpoint>")
    assert failed == '<p id="model" data-state="failed">the model did not load: best.pt: &lt;not a checkpoint&gt;</p>'


def _requests_by_status(url: str) -> dict[str, float]:
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{url}/metrics").text)}
    return {s.labels["status"]: s.value for s in families["tphyolo_requests"].samples if s.name.endswith("_total")}


def test_metrics_count_what_was_sent(server, image_files):
    before = _requests_by_status(server)
    for path in image_files[:3]:
        assert _post(server, path).status_code == 200
    assert _post(server, image_files[0], conf="2").status_code == 422
    text = httpx.get(f"{server}/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    after = _requests_by_status(server)
    assert after.get("200", 0) - before.get("200", 0) == 3
    assert after.get("422", 0) - before.get("422", 0) == 1
    batch = {s.name: s.value for s in families["tphyolo_batch_size"].samples}
    assert batch["tphyolo_batch_size_sum"] >= 3 and batch["tphyolo_batch_size_count"] >= 1
    for name in ("tphyolo_queue_depth", "tphyolo_images_per_second", "tphyolo_request_seconds", "tphyolo_images"):
        assert name in families


def test_images_are_checked_off_the_event_loop_and_decoded_by_the_worker(server, image_files, predicted,
                                                                        monkeypatch):
    """Each body's header is read in the service's checker threads, where no event loop runs, and its pixels
    are decoded by the worker process, not the server's: its bytes cross to the worker, not 6 MB of pixels per
    1920x1080 image; the answers stay predict's. Old behaviour: the server decoded every image and sent its
    pixels."""
    import asyncio
    import threading

    import tphyolo.serve.app as app_module
    import tphyolo.serve.engine as engine_module

    seen: list[tuple[str, bool]] = []
    check = app_module.check_request_image

    def recording(data, *, where):
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        seen.append((threading.current_thread().name, on_loop))
        return check(data, where=where)

    def not_here(image):
        raise AssertionError("the server process decoded an image")

    monkeypatch.setattr(app_module, "check_request_image", recording)
    monkeypatch.setattr(engine_module, "decode_request_image", not_here)  # the worker process has its own
    with Client(server) as client:
        results = [client.detect(path) for path in image_files[:2]]
    assert len(seen) == 2
    assert all(name.startswith("tphyolo-serve-check") and not on_loop for name, on_loop in seen), seen
    assert all(torch.equal(r.boxes, e.boxes) for r, e in zip(results, predicted[:2], strict=True))


def test_the_images_of_a_batch_decode_at_once_in_the_engine(tiny_weights, image_files, monkeypatch):
    """An engine given a batch decodes its images on its decoding threads, one image each, and answers each as
    predict does; one image decodes on the caller's thread. (A GPU worker takes batches of up to 32: decoded one
    after another, they would keep the GPU waiting.)"""
    import threading

    import tphyolo.serve.engine as engine_module
    from tphyolo.infer.spec import DetectorSpec
    from tphyolo.serve.images import check_request_image

    threads: list[str] = []
    decode = engine_module.decode_request_image

    def recording(image):
        threads.append(threading.current_thread().name)
        return decode(image)

    monkeypatch.setattr(engine_module, "decode_request_image", recording)
    spec = DetectorSpec((str(tiny_weights),), inference=InferenceConfig(**SETTINGS), device="cpu")
    engine = engine_module.InferenceEngine(spec, max_batch=4)
    try:
        images = [check_request_image(path.read_bytes(), where=path.name) for path in image_files[:4]]
        rows = engine.detect(images, engine.defaults)
        assert len(threads) == 4 and all(name.startswith("tphyolo-decode") for name in threads), threads
        threads.clear()
        alone = engine.detect(images[:1], engine.defaults)
        assert threads == [threading.current_thread().name]
    finally:
        engine.close()
    expected = Predictor(str(tiny_weights), device="cpu", batch=4, **SETTINGS)(image_files[:4])
    for found, result in zip(rows, expected, strict=True):
        assert len(found) == len(result) > 0 and np.allclose(found[:, :4], result.boxes.numpy(), atol=1e-3)
    assert alone[0].shape == rows[0].shape and np.allclose(alone[0], rows[0], atol=1e-3)  # batched: float rounding

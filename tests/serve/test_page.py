"""The page at `/` in headless Chromium, driven over the DevTools protocol: an image set on its file input is
sent to the service, its boxes are drawn on the canvas over the image, and the JSON panel shows the answer.

Chromium is /usr/bin/chromium (as for tests/report/test_render.py); without it the test is skipped, or fails
when TPHYOLO_REQUIRE_FIXTURES is set (CI)."""

from __future__ import annotations

import base64
import itertools
import json
import re
import subprocess
import time
from pathlib import Path

import cv2
import httpx
import numpy as np
import pytest
from tests.helpers import require_path
from tests.serve.conftest import SETTINGS

from tphyolo.predict.predictor import Predictor

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0"]  # fmt: skip
TIMEOUT_S = 60.0


class DevTools:
    """A minimal DevTools-protocol session with one page (synchronous websocket)."""

    def __init__(self, socket) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def call(self, method: str, **params) -> dict:
        ident = next(self._ids)
        self._socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=TIMEOUT_S))
            if message.get("id") == ident:
                assert "error" not in message, message
                return message["result"]

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def wait_for(self, expression: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not self.evaluate(expression):
            assert time.monotonic() < deadline, f"timed out waiting for {expression}"
            time.sleep(0.1)


@pytest.mark.slow
def test_the_page_draws_the_boxes_of_a_chosen_image(server, tiny_weights, image_files, tmp_path):
    connect = pytest.importorskip("websockets.sync.client").connect
    chromium = require_path(CHROMIUM, f"{CHROMIUM} not found (.ci/run installs it: apt-get install chromium)")
    path = image_files[1]
    expected = Predictor(str(tiny_weights), device="cpu", **SETTINGS)([path])[0]
    assert len(expected) > 0
    browser = subprocess.Popen([str(chromium), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "about:blank"],
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        port = None
        deadline = time.monotonic() + TIMEOUT_S
        while port is None and time.monotonic() < deadline:
            line = browser.stderr.readline()
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            port = found and int(found.group(1))
        assert port, "Chromium did not open its DevTools port"
        pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page"]
        with connect(pages[0]["webSocketDebuggerUrl"], max_size=2**26, open_timeout=TIMEOUT_S) as socket:
            tools = DevTools(socket)
            tools.call("Page.navigate", url=f"{server}/")
            tools.wait_for("document.readyState === 'complete' && !!document.getElementById('file')")
            root = tools.call("DOM.getDocument")["root"]["nodeId"]
            node = tools.call("DOM.querySelector", nodeId=root, selector="#file")["nodeId"]
            tools.call("DOM.setFileInputFiles", files=[str(path)], nodeId=node)
            tools.wait_for("document.body.dataset.state === 'done'")
            panel = json.loads(tools.evaluate("document.getElementById('json').textContent"))
            drawn = tools.evaluate("document.getElementById('canvas').toDataURL('image/png')")
    finally:
        browser.kill()
        browser.wait()
    entry = panel["images"][0]
    assert len(entry["boxes"]) == len(expected)
    assert entry["scores"] == pytest.approx(expected.scores.tolist(), abs=1e-6)
    canvas = cv2.imdecode(np.frombuffer(base64.b64decode(drawn.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
    original = cv2.imread(str(path))
    assert canvas.shape == original.shape  # the image, at its size
    changed = np.abs(canvas.astype(int) - original.astype(int)).max(axis=2) > 40
    assert changed.mean() > 0.01  # boxes and labels drawn over it
    x1, y1, x2, y2 = (int(round(v)) for v in expected.boxes[0].tolist())
    edge = changed[max(y1 - 1, 0) : y2 + 2, max(x1 - 1, 0) : min(x1 + 3, canvas.shape[1])]
    assert edge.mean() > 0.3  # the best box's left edge is drawn where the answer puts it

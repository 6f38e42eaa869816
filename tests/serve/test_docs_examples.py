"""docs/serving.md's curl examples, run against a live service: each answers 200 with JSON (or Prometheus
text for /metrics) that holds what the page says it does. The image files they name are made here."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "serving.md"
LOCAL = "http://127.0.0.1:8000"


def curl_examples() -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(), re.S)
    return [shlex.split(line) for block in blocks for line in block.splitlines() if line.startswith("curl ")]


def test_the_page_has_curl_examples_of_every_route():
    urls = " ".join(" ".join(argv) for argv in curl_examples())
    for route in ("/readyz", "/v1/detect", "/v1/models", "/metrics", "format=coco", "file=@"):
        assert route in urls


@pytest.mark.parametrize("argv", curl_examples(), ids=lambda argv: argv[-1].removeprefix(LOCAL))
def test_curl_example(argv, server, image_files, tmp_path):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    shutil.copy(next(p for p in image_files if p.suffix == ".jpg"), tmp_path / "image.jpg")
    shutil.copy(next(p for p in image_files if p.suffix == ".png"), tmp_path / "other.png")
    command = [word.replace(LOCAL, server) for word in argv]
    run = subprocess.run([*command, "-w", "\n%{http_code}"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    body, status = run.stdout.rsplit("\n", 1)
    assert status == "200", body
    if argv[-1].endswith("/metrics"):
        assert "tphyolo_requests_total" in body
        return
    answer = json.loads(body)
    if "/v1/detect" in argv[-1] and "format=coco" in argv[-1]:
        assert answer and {"image_id", "category_id", "bbox", "score"} <= set(answer[0])
    elif "/v1/detect" in argv[-1]:
        sent = sum(word.startswith("file=@") for word in argv) or 1
        assert len(answer["images"]) == sent and set(answer["model"]) == {"name", "hash"}
        if "conf=0.3" in " ".join(argv):  # the tiny untrained model scores lower: nothing may be left
            assert all(min(image["scores"], default=1) >= 0.3 for image in answer["images"])
        else:  # the service's default, 0.001
            assert all(len(image["boxes"]) > 0 for image in answer["images"])

"""The report page in headless Chromium: it loads the pictures it references, from its own folder, and no
other file; each of them exists; its screenshot is not blank.

Chromium is /usr/bin/chromium (`.ci/run` installs it through the system package manager). Without it the test
is skipped, or fails when TPHYOLO_REQUIRE_FIXTURES is set (CI). With TPHYOLO_REPORT_SCREENSHOT=PATH the
screenshot is also copied to PATH: the README's picture is made by

    TPHYOLO_REPORT_SCREENSHOT=docs/report.png pytest tests/report/test_render.py
"""

import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import cv2
from tests.helpers import require_path

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--enable-logging=stderr", "--v=1",
]  # fmt: skip


def test_report_renders_in_headless_chromium(simulated_report, tmp_path):
    chromium = require_path(CHROMIUM, f"{CHROMIUM} not found (.ci/run installs it: apt-get install chromium)")
    page = simulated_report / "report.html"
    shot = tmp_path / "report.png"
    run = subprocess.run(
        [str(chromium), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
         "--window-size=1280,2000", page.as_uri()],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = {Path(unquote(u)) for u in re.findall(r"FileURLLoader::Start: file://(\S+)", run.stderr)}
    referenced = {simulated_report / ref for ref in re.findall(r'src="([^"]+)"', page.read_text())}
    assert len(referenced) > 20 and loaded == referenced | {page}, sorted(loaded ^ (referenced | {page}))[:5]
    assert all(path.is_file() and path.stat().st_size > 0 for path in loaded)  # Chromium logs a missing file too

    image = cv2.imread(str(shot))
    assert image is not None and image.shape[:2] == (2000, 1280)
    assert image.std() > 20  # a blank (or one-colour) page has no variance
    assert (image.reshape(-1, 3) < 100).all(1).mean() > 0.01  # text and plots, not a white page
    if target := os.environ.get("TPHYOLO_REPORT_SCREENSHOT"):
        small = cv2.resize(image[:1500], (800, 938), interpolation=cv2.INTER_AREA)
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(tmp_path / "small.png"), small, [cv2.IMWRITE_PNG_COMPRESSION, 9])
        shutil.copyfile(tmp_path / "small.png", target)

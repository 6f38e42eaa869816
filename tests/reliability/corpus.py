"""The bad inputs of the reliability tests, generated (never checked in): images with faults a scan, training,
validation and prediction meet, yaml and JSON bombs, label files that are not text, paths that are not regular
files, and a dataset that holds them beside good images."""

from __future__ import annotations

import io
import os
import struct
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import cv2
import numpy as np
import pytest
from PIL import Image

T = TypeVar("T")

NON_UTF8_NAME = b"caf\xe9.jpg"  # Latin-1 bytes: not valid UTF-8


def jpeg_bytes(seed: int, size: tuple[int, int] = (64, 64)) -> bytes:
    rng = np.random.default_rng(seed)
    ok, data = cv2.imencode(".jpg", rng.integers(0, 255, (*size, 3), dtype=np.uint8))
    assert ok
    return data.tobytes()


def png_declaring(width: int, height: int) -> bytes:
    """A valid-looking PNG of under 1 KB whose header declares `width` x `height` pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\0" * 4096)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def png_bytes(image: np.ndarray) -> bytes:
    ok, data = cv2.imencode(".png", image)
    assert ok
    return data.tobytes()


def truncated_jpeg(seed: int, size: tuple[int, int] = (64, 64)) -> bytes:
    """A JPEG cut in the middle of its scan: no end marker; decoders fill the missing rows."""
    data = jpeg_bytes(seed, size)
    return data[: len(data) * 2 // 3]


def animated_gif(frames: int = 3, size: tuple[int, int] = (40, 48)) -> bytes:
    """A GIF of `frames` (at most 6) frames (h, w = `size`), frame k filled with grey 40 * k + 30."""
    images = [Image.fromarray(np.full((*size, 3), 40 * k + 30, np.uint8)) for k in range(frames)]
    buffer = io.BytesIO()
    images[0].save(buffer, "GIF", save_all=True, append_images=images[1:], duration=100, loop=0)
    return buffer.getvalue()


def deep_json(depth: int = 100_000) -> str:
    """A JSON text of `depth` nested lists: 2 * depth bytes that exhaust a recursive parser's stack."""
    return "[" * depth + "]" * depth


# Label files that are not UTF-8 text, by kind: what editors and other tools write.
NOT_TEXT_LABELS = {
    "utf16": "0 0.5 0.5 0.2 0.2\n".encode("utf-16"),  # with its byte-order mark
    "utf16_no_bom": "0 0.5 0.5 0.2 0.2\n".encode("utf-16-le"),
    "latin1": "0 0.5 0.5 0.2 0.2\n# caf\xe9\n".encode("latin-1"),
    "binary": bytes(range(256)) * 4,
}


def not_regular_files(folder: Path, suffix: str) -> dict[str, Path]:
    """In `folder`: paths named `<kind><suffix>` that are not regular files, by kind: a directory, a FIFO, a
    link to /dev/zero (a device that never ends), a dangling link and a link loop (a link to itself)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {kind: folder / f"{kind}{suffix}" for kind in ("directory", "fifo", "zero", "dangling", "loop")}
    paths["directory"].mkdir()
    os.mkfifo(paths["fifo"])
    paths["zero"].symlink_to("/dev/zero")
    paths["dangling"].symlink_to(folder / f"nothing{suffix}")
    paths["loop"].symlink_to(paths["loop"].name)  # a link to itself
    return paths


def tiff_opencv_cannot_decode() -> bytes:
    """An uncompressed TIFF cut in half: PIL opens and verifies it, OpenCV's decoder fails on it."""
    buffer = io.BytesIO()
    Image.fromarray(np.full((64, 64, 3), 100, np.uint8)).save(buffer, "TIFF")
    data = buffer.getvalue()
    return data[: len(data) // 2]


def billion_laughs() -> str:
    """A yaml of about 500 bytes that expands to 10**9 strings."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for k in range(1, 9):
        name, previous = chr(ord("a") + k), chr(ord("a") + k - 1)
        lines.append(f"{name}: &{name} [{','.join([f'*{previous}'] * 10)}]")
    return "\n".join(lines) + "\nnames: *i\n"


def write_dataset(root: Path, *, good: int = 6) -> dict[str, Path]:
    """`root/images` + `root/labels` (YOLO) with `good` labelled images, one image with a non-UTF-8 name (also
    labelled), a PNG bomb, a TIFF only PIL reads, and a corrupt label; plus `root/data.yaml` (2 classes).
    Returns the bad files by kind."""
    images, labels = root / "images", root / "labels"
    images.mkdir(parents=True)
    labels.mkdir()
    for i in range(good):
        (images / f"good{i}.jpg").write_bytes(jpeg_bytes(i))
        (labels / f"good{i}.txt").write_text(f"{i % 2} 0.5 0.5 0.4 0.3\n")
    odd = os.path.join(os.fsencode(images), NON_UTF8_NAME)
    with open(odd, "wb") as f:
        f.write(jpeg_bytes(99))
    with open(os.path.join(os.fsencode(labels), NON_UTF8_NAME[:-4] + b".txt"), "wb") as f:
        f.write(b"1 0.4 0.4 0.2 0.2\n")
    bad = {
        "non_utf8": Path(os.fsdecode(odd)),
        "bomb": images / "bomb.png",
        "tiff": images / "opencv_fails.tif",
        "label": labels / "badlabel.txt",
    }
    bad["bomb"].write_bytes(png_declaring(40000, 40000))
    bad["tiff"].write_bytes(tiff_opencv_cannot_decode())
    (images / "badlabel.jpg").write_bytes(jpeg_bytes(50))
    bad["label"].write_text("0 0.5 nan 0.2 0.2\n")
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images\nval: images\nnames: [a, b]\n")
    return bad


def finishes_within(seconds: float, call: Callable[[], T]) -> T:
    """`call()`'s result, failing the test when it has not returned after `seconds` (a read of a FIFO blocks
    for ever, a read of /dev/zero never ends): the hang becomes a failure, its thread is left behind."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:  # handed to the test below
            outcome.append((False, error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        pytest.fail(f"still running after {seconds} s (a FIFO or a device opened?)", pytrace=False)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value

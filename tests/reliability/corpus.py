"""The bad inputs of the reliability tests, generated (never checked in): images with faults a scan, training,
validation and prediction meet, yaml bombs, and a dataset that holds them beside good images."""

from __future__ import annotations

import io
import os
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

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

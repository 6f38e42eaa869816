"""Caching decoded, resized images: in RAM (one uint8 array per image) or on disk (.npy files).

Cached images are exactly what `DetectionDataset` would decode and resize (long side = imgsz; imgsz None: each
image at its own size, as training on tiles cuts its windows from them).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from tphyolo.data.files.image_io import read_image, resize_long_side
from tphyolo.data.files.paths import is_read_only_folder
from tphyolo.errors import InputError

CACHE_MODES = ("ram", "disk")
RAM_SAFETY = 1.3  # refuse RAM caching unless available memory exceeds the estimate by this factor


def resized_shape(h0: int, w0: int, imgsz: int | None) -> tuple[int, int]:
    if imgsz is None:
        return h0, w0
    r = imgsz / max(h0, w0)
    return max(1, round(h0 * r)), max(1, round(w0 * r))


def estimate_cache_bytes(shapes: list[tuple[int, int]], imgsz: int | None) -> int:
    """Bytes needed to hold every image (h0, w0) resized to long side imgsz as uint8 BGR."""
    return sum(h * w * 3 for h, w in (resized_shape(h0, w0, imgsz) for h0, w0 in shapes))


def available_memory_bytes() -> int:
    """Memory the OS reports as available (MemAvailable), or total physical memory when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def disk_cache_path(im_file: str, imgsz: int | None) -> Path:
    """`<images folder>_cache<imgsz>/<file name>.npy` beside the image folder (`_cachefull` for images at their
    own size; the whole name: `x.jpg` and `x.png` side by side get one file each)."""
    p = Path(im_file)
    return p.parent.with_name(f"{p.parent.name}_cache{imgsz or 'full'}") / f"{p.name}.npy"


def load_resized(im_file: str, imgsz: int | None, *, augment: bool) -> np.ndarray:
    """The image of `im_file` at long side `imgsz`, or at its own size for None."""
    image = read_image(im_file)
    return image if imgsz is None else resize_long_side(image, imgsz, augment=augment)


def _disk_entry(im_file: str, imgsz: int, augment: bool) -> Path:
    path = disk_cache_path(im_file, imgsz)
    if path.is_file():
        try:
            np.load(path, allow_pickle=False)
            return path
        except (OSError, ValueError):
            pass
    if not path.parent.exists() and is_read_only_folder(path.parent.parent):
        raise InputError(f"disk image cache: {path.parent.parent} is read-only; use cache='ram' or no cache")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")  # np.save keeps a name ending in .npy
    np.save(tmp, load_resized(im_file, imgsz, augment=augment), allow_pickle=False)
    os.replace(tmp, path)
    return path


class ImageCache:
    """Resized images of a list of files: `get(i)` returns image i (uint8 BGR, long side imgsz, or its own size
    for imgsz None)."""

    def __init__(
        self, files: list[str], shapes: list[tuple[int, int]], *, imgsz: int | None, mode: str, augment: bool,
        workers: int = 4,
    ) -> None:
        if mode not in CACHE_MODES:
            raise InputError(f"image cache {mode!r}: expected one of {CACHE_MODES}")
        self.mode, self.imgsz, self.files, self.augment = mode, imgsz, list(files), augment
        self.nbytes = estimate_cache_bytes(shapes, imgsz)
        if mode == "ram":
            available = available_memory_bytes()
            if self.nbytes * RAM_SAFETY > available:
                raise MemoryError(
                    f"RAM image cache needs {self.nbytes / 2**30:.1f} GiB for {len(files)} images at "
                    f"{imgsz or 'full'} px but only {available / 2**30:.1f} GiB is available; use cache='disk' or no "
                    "cache"
                )
        with ThreadPoolExecutor(max_workers=workers) as pool:
            if mode == "ram":
                self._images = list(pool.map(lambda f: load_resized(f, imgsz, augment=augment), self.files))
            else:
                self._paths = list(pool.map(lambda f: _disk_entry(f, imgsz, augment), self.files))

    def get(self, i: int) -> np.ndarray:
        if self.mode == "ram":
            return self._images[i]
        try:
            return np.load(self._paths[i], allow_pickle=False)
        except (OSError, ValueError):
            return load_resized(self.files[i], self.imgsz, augment=self.augment)

"""Converting VisDrone-DET folders to another label format (default: YOLO labels with ignore side files).

A split folder `SRC/{images,annotations}` becomes `DST/images` plus the target format's labels (YOLO:
`DST/{labels,ignore}`; COCO: `DST/annotations.json`); a folder of splits (`SRC/VisDrone2019-DET-train/...`,
`...-val`, `...-test-dev`) becomes `DST/<split folder>/...`. Images are symlinked (or copied); every written
image has labels (empty for background).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from tphyolo.data.formats import get_format
from tphyolo.data.formats.base import LabeledImage, LabelFormat
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.data.scan import scan_split


def _is_split(folder: Path) -> bool:
    return (folder / "images").is_dir() and (folder / "annotations").is_dir()


def _split_role(name: str) -> str | None:
    lowered = name.lower()
    for role in ("train", "val", "test"):
        if role in lowered:
            return role
    return None


def _convert_split(src: Path, dst: Path, fmt: LabelFormat, copy_images: bool, log: Callable[[str], None]) -> int:
    scan = scan_split(src / "images", names=NAMES, cache=False)
    for line in scan.report.problems:
        log(f"skipped: {line}")
    (dst / "images").mkdir(parents=True, exist_ok=True)
    written = []
    for r in scan.records:
        image = Path(r.im_file)
        target = dst / "images" / image.name
        if target.is_symlink() or target.exists():
            target.unlink()
        if copy_images:
            shutil.copy2(image, target)
        else:
            os.symlink(image.resolve(), target)
        written.append(LabeledImage(target, r.height, r.width, r.labels))
    if written:
        fmt.write(written, names=NAMES)
    log(f"{src} -> {dst}: {scan.report.summary()}")
    return len(scan.records)


def convert_visdrone(
    src: str | Path,
    dst: str | Path,
    *,
    to: str = "yolo",
    copy_images: bool = False,
    log: Callable[[str], None] = print,
) -> Path:
    """Convert a VisDrone-DET split folder, or a folder holding several, into the layout of the registered
    label format `to` under `dst` (ValueError naming the known formats for an unknown one).

    YOLO labels: `class cx cy w h` normalised (class = category - 1); ignore regions (category 0) go to
    `ignore/STEM.txt` as normalised `cx cy w h`; category 11 is dropped. Unusable files are skipped and
    reported through `log`. Returns the written `dst/data.yaml`."""
    fmt = get_format(to)
    src, dst = Path(src).resolve(), Path(dst)
    if _is_split(src):
        _convert_split(src, dst, fmt, copy_images, log)
        splits = {"train": "images", "val": "images"}
    else:
        found = sorted(p for p in src.iterdir() if p.is_dir() and _is_split(p)) if src.is_dir() else []
        if not found:
            raise FileNotFoundError(f"{src}: no VisDrone split here (expected images/ and annotations/ folders)")
        splits = {}
        for folder in found:
            _convert_split(folder, dst / folder.name, fmt, copy_images, log)
            role = _split_role(folder.name)
            if role and role not in splits:
                splits[role] = f"{folder.name}/images"
        if "train" not in splits and "val" not in splits:
            first = f"{found[0].name}/images"
            splits = {"train": first, "val": first}
    data = {"path": ".", **splits, "nc": len(NAMES), "names": dict(enumerate(NAMES))}
    path = dst / "data.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path

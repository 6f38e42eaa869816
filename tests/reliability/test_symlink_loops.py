"""A `--source` glob over folders whose symlinks form loops ends, listing each image once (Python's recursive
glob follows the loops exponentially), and matches what a glob over the same tree without links matches."""

from __future__ import annotations

import glob
from pathlib import Path

from tests.reliability.corpus import finishes_within, jpeg_bytes

from tphyolo.predict.sources import resolve_source


def _tree(root: Path, *, links: bool) -> Path:
    """root/data/{a,b,c}/{x,y}.jpg and data/.hidden/z.jpg; with `links`, every folder links back to data/
    (3 loops) and one link points to itself."""
    data = root / "data"
    for folder in ("a", "b", "c", ".hidden"):
        (data / folder).mkdir(parents=True)
        for k, name in enumerate(("x", "y") if folder != ".hidden" else ("z",)):
            (data / folder / f"{name}.jpg").write_bytes(jpeg_bytes(k))
        if links:
            (data / folder / "up").symlink_to(data, target_is_directory=True)
    if links:
        (data / "self.jpg").symlink_to("self.jpg")
    return data


def test_a_recursive_glob_over_link_loops_ends_with_each_image_once(tmp_path):
    data = _tree(tmp_path / "loops", links=True)
    found = finishes_within(30, lambda: resolve_source(str(data / "**" / "*.jpg")))
    plain = _tree(tmp_path / "plain", links=False)
    expected = sorted(Path(p).relative_to(plain) for p in glob.glob(str(plain / "**" / "*.jpg"), recursive=True))
    images = sorted(p.relative_to(data) for p in found if p.name != "self.jpg")
    assert images == expected and len(expected) == 6
    assert data / "self.jpg" in found  # the link loop is listed, and skipped by name when read

"""Files the scan keeps but uses only in part (a JPEG cut short, a label file over the object limit) and files
of several frames: counted as they are used, named in the report, and said by the commands that score."""

import numpy as np
from tests.reliability.corpus import animated_gif, jpeg_bytes, truncated_jpeg

from tphyolo.data.labels import MAX_OBJECTS_PER_IMAGE
from tphyolo.data.report import format_problems, format_report
from tphyolo.data.scan import scan_split

DENSE = MAX_OBJECTS_PER_IMAGE + 904


def _split(root):
    images, labels = root / "images", root / "labels"
    images.mkdir(parents=True)
    labels.mkdir()
    (images / "good.jpg").write_bytes(jpeg_bytes(0))
    (images / "cut.jpg").write_bytes(truncated_jpeg(1))
    (images / "anim.gif").write_bytes(animated_gif(frames=4))
    (images / "dense.jpg").write_bytes(jpeg_bytes(2, (200, 300)))
    for stem in ("good", "cut", "anim"):
        (labels / f"{stem}.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    rng = np.random.default_rng(0)
    centres = rng.uniform(0.1, 0.9, (DENSE, 2))
    (labels / "dense.txt").write_text("".join(f"0 {x:.6f} {y:.6f} 0.01 0.01\n" for x, y in centres))
    return images, labels


def test_partial_files_are_kept_named_and_cached(tmp_path):
    images, labels = _split(tmp_path)
    for cache in (True, True):  # written, then loaded
        scan = scan_split(images, names=("a",), cache=cache)
        report = scan.report
        assert report.images == 4 and len(scan.records) == 4 and not report.problems  # the GIF is one image
        assert report.partial == [
            f"{images / 'cut.jpg'}: truncated JPEG (no end marker): the missing part is filled grey by the decoder",
            f"{labels / 'dense.txt'}: 5,000 objects, above the limit of 4,096 per image; the last 904 dropped",
        ]
        assert f"{images / 'anim.gif'}: 4 frames (GIF); the first frame is used" in report.notes
        dense = next(r for r in scan.records if r.im_file.endswith("dense.jpg"))
        assert len(dense.labels.classes) == MAX_OBJECTS_PER_IMAGE
    assert report.from_cache
    text = format_problems("val", scan)
    assert text.splitlines()[0] == "[val] 2 file(s) used in part:" and "cut.jpg: truncated JPEG" in text
    assert "used in part (2):" in format_report("val", scan)
    assert "0 problem(s), 2 partial" in report.summary()

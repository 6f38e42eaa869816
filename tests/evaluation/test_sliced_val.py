"""`tphyolo.val(..., slicing=...)`: the mAP of sliced predictions on full images, with a detector that sees."""

from tests.evaluation.test_evaluate import CPU
from tests.infer.block_finder import BlockFinder, write_block_dataset

import tphyolo
from tphyolo.infer.slicing import SliceConfig

# Blocks cut by the 128 px windows (step 96) and blocks inside one window, on two 300 x 200 images.
IMAGES = {
    "a": (200, 300, [(40, 60, 260, 110, 0), (250, 150, 270, 170, 1)]),
    "b": (200, 300, [(10, 10, 30, 40, 1), (100, 90, 200, 180, 0), (220, 20, 290, 60, 1)]),
}


def _val(data, **settings):
    return tphyolo.val(BlockFinder(), data, runtime=CPU, workers=0, batch=2, imgsz=128, conf=0.1,
                       scan_cache=False, **settings)  # fmt: skip


def test_sliced_val_scores_merged_slices_against_the_full_images(tmp_path):
    data = write_block_dataset(tmp_path / "blocks", IMAGES)
    merged = _val(data, slicing=SliceConfig(128, 0.25, full=True), merge="greedy-nmm", match="ios")
    pieces = _val(data, slicing=SliceConfig(128, 0.25), merge="nms")
    assert merged.images == 2 and merged.instances == 5
    assert merged.map50 > 0.99  # each block found once, whole
    assert pieces.map50 < merged.map50 - 0.05  # pieces of cut blocks: false positives and misses
    assert pieces.mr < 0.8

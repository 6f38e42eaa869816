"""Inference sources through symlinked folders: each file once, by its shortest path."""

import cv2
import numpy as np

from tphyolo.predict.sources import resolve_source


def test_a_glob_lists_each_file_once_through_symlink_loops_and_linked_folders(tmp_path):
    shots, elsewhere = tmp_path / "shots", tmp_path / "elsewhere"
    (shots / "day").mkdir(parents=True)
    elsewhere.mkdir()
    image = np.zeros((8, 8, 3), np.uint8)
    for path in (shots / "a.jpg", shots / "day" / "b.jpg", elsewhere / "c.jpg"):
        cv2.imwrite(str(path), image)
    (shots / "day" / "up").symlink_to(shots, target_is_directory=True)  # a loop back to the top
    (shots / "linked").symlink_to(elsewhere, target_is_directory=True)  # a linked folder is followed
    files = resolve_source(f"{shots}/**/*.jpg")
    assert files == [shots / "a.jpg", shots / "day" / "b.jpg", shots / "linked" / "c.jpg"]

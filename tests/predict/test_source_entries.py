"""What a source folder holds besides good images: entries that are not regular files are listed and skipped by
name (never opened), a file whose name holds glob characters is that file, and a partial JPEG or a file of
several frames is read with a note on its frame."""

import numpy as np
import pytest
from tests.reliability.corpus import animated_gif, finishes_within, jpeg_bytes, not_regular_files, truncated_jpeg

from tphyolo.predict.sources import iter_frames, resolve_source

KINDS = {
    "dangling": "a symbolic link to a missing target",
    "directory": "a directory",
    "fifo": "a FIFO",
    "loop": "a symbolic link loop",
    "zero": "a character device",
}


def test_entries_that_are_not_files_are_counted_and_named_as_skipped(tmp_path):
    (tmp_path / "good.jpg").write_bytes(jpeg_bytes(0))
    (tmp_path / "notes.txt").write_text("not an image: not listed")
    odd = not_regular_files(tmp_path, ".jpg")
    files = resolve_source(tmp_path)
    assert [f.name for f in files] == sorted(["good.jpg", *(p.name for p in odd.values())])
    skipped = []
    frames = finishes_within(30, lambda: list(iter_frames(files, on_skip=lambda f, e: skipped.append(str(e)))))
    assert [f.path.name for f in frames] == ["good.jpg"]
    assert skipped == [f"{odd[kind]}: not a regular file ({what})" for kind, what in sorted(KINDS.items())]
    with pytest.raises(ValueError, match="not a regular file \\(a FIFO\\)"):  # without on_skip: stops, named
        finishes_within(30, lambda: list(iter_frames([odd["fifo"]])))


def test_a_name_with_glob_characters_that_exists_is_a_path(tmp_path):
    for name in ("[x]*.jpg", "a?.jpg", "ax.jpg"):
        (tmp_path / name).write_bytes(jpeg_bytes(len(name)))
    assert resolve_source(tmp_path / "[x]*.jpg") == [tmp_path / "[x]*.jpg"]
    assert resolve_source(tmp_path / "a?.jpg") == [tmp_path / "a?.jpg"]  # the file, not a?.jpg and ax.jpg
    assert resolve_source(str(tmp_path / "a[x].jpg")) == [tmp_path / "ax.jpg"]  # no such file: a pattern
    with pytest.raises(FileNotFoundError, match="the pattern matches no image or video file"):
        resolve_source(str(tmp_path / "b*.jpg"))


def test_a_partial_jpeg_and_an_animated_gif_carry_a_note(tmp_path):
    (tmp_path / "a_cut.jpg").write_bytes(truncated_jpeg(3))
    (tmp_path / "b_anim.gif").write_bytes(animated_gif(frames=5))
    (tmp_path / "c_good.jpg").write_bytes(jpeg_bytes(4))
    cut, anim, good = iter_frames(resolve_source(tmp_path))
    assert cut.notes == (f"{cut.path}: truncated JPEG (no end marker): the missing part is filled grey by the "
                         "decoder",)  # fmt: skip
    assert anim.notes == (f"{anim.path}: 5 frames (GIF); the first frame is used",)
    assert anim.image.shape == (40, 48, 3) and np.abs(anim.image.astype(int) - 30).max() <= 1  # frame 0
    assert good.notes == ()

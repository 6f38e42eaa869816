"""Output names of prediction sources: unique per file, stems for the files of one folder."""

from pathlib import Path

from tphyolo.predict.sources import source_names


def test_names_are_unique_per_source_file(tmp_path):
    files = [tmp_path / rel for rel in ("a/x.jpg", "b/x.jpg", "a/x.png", "a/y.jpg")]
    assert source_names(files) == ["a/x_jpg", "b/x", "a/x_png", "a/y"]
    assert source_names([tmp_path / "one.jpg", tmp_path / "two.jpg"]) == ["one", "two"]
    assert source_names([Path("img.jpg"), Path("img.jpg")]) == ["img", "img"]  # one file listed twice
    assert source_names([]) == []

"""Reading and writing image files: any file name, one pixel limit checked before decoding, the decoder training
uses (what the scan verifies is what training decodes), and one policy for partial and multi-frame files."""

import os

import cv2
import numpy as np
import pytest
from PIL import Image
from tests.reliability.corpus import (
    NON_UTF8_NAME,
    animated_gif,
    jpeg_bytes,
    png_declaring,
    tiff_opencv_cannot_decode,
    truncated_jpeg,
)

from tphyolo.data.files.image_io import (
    MAX_IMAGE_PIXELS,
    ImageError,
    load_image,
    read_image,
    read_image_size,
    verify_image,
    write_image,
)


def test_a_name_that_is_not_utf8_reads_and_writes(tmp_path):
    name = os.fsdecode(os.path.join(os.fsencode(tmp_path), NON_UTF8_NAME))  # surrogate-escaped str
    with open(name, "wb") as f:
        f.write(jpeg_bytes(3, (40, 50)))
    image = read_image(name)
    assert image.shape == (40, 50, 3) and image.std() > 10
    assert verify_image(name).width == 50
    out = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"out\xff.png"))
    write_image(out, image)
    assert b"out\xff.png" in os.listdir(os.fsencode(tmp_path))
    np.testing.assert_array_equal(read_image(out), image)


def test_a_small_file_declaring_a_huge_image_is_refused_before_decoding(tmp_path, monkeypatch):
    def no_decoding(*args, **kwargs):
        raise AssertionError("the pixels were decoded")

    monkeypatch.setattr(cv2, "imdecode", no_decoding)  # the image reader's decoder
    for width, height in ((40000, 40000), (12000, 12000)):  # above PIL's own limit, and between the two
        path = tmp_path / f"bomb{width}.png"
        path.write_bytes(png_declaring(width, height))
        assert path.stat().st_size < 1024
        with pytest.raises(ImageError, match=f"{path.name}: declares .*pixels, over the limit of {MAX_IMAGE_PIXELS:,}"):
            read_image(path)
        with pytest.raises(ImageError, match="over the limit"):
            verify_image(path)


def test_verify_uses_the_training_decoder(tmp_path):
    path = tmp_path / "half.tif"
    path.write_bytes(tiff_opencv_cannot_decode())
    with pytest.raises(ImageError, match="half.tif: cannot decode image"):
        verify_image(path)


def test_a_truncated_jpeg_decodes_as_a_file_read_by_opencv_does(tmp_path):
    data = jpeg_bytes(1, (90, 120))
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[:-300])
    from_disk = cv2.imread(str(path))
    assert from_disk is not None
    np.testing.assert_array_equal(read_image(path), from_disk)
    assert verify_image(path).partial.startswith("truncated JPEG (no end marker)")


def test_a_jpeg_with_bytes_after_its_end_marker_is_whole(tmp_path):
    """Only a JPEG cut short is partial: data a camera appends after the end marker is not a truncation."""
    path = tmp_path / "tail.jpg"
    path.write_bytes(jpeg_bytes(2) + b"camera data \xff\x00 after the end")
    image, info = load_image(path)
    assert info.partial is None and image.shape == (64, 64, 3)
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(truncated_jpeg(2))
    assert load_image(cut)[1].partial.startswith("truncated JPEG")


def test_a_file_of_several_frames_is_its_first_frame_with_a_note(tmp_path):
    path = tmp_path / "anim.gif"
    path.write_bytes(animated_gif(frames=3))
    image, info = load_image(path)
    assert image.shape == (40, 48, 3) and abs(int(image.mean()) - 30) <= 1  # frame 0 is grey 30
    assert info.frame_note == "3 frames (GIF); the first frame is used" and info.partial is None
    assert info.warnings == (info.frame_note,) and verify_image(path) == info
    one = tmp_path / "one.gif"
    one.write_bytes(animated_gif(frames=1))
    assert load_image(one)[1].warnings == ()


def test_the_header_reader_gives_the_displayed_size_within_the_pixel_limit(tmp_path):
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_declaring(100_000, 100_000))  # 10**10 pixels
    with pytest.raises(ImageError, match=f"^{bomb}: declares .* pixels, over the limit of {MAX_IMAGE_PIXELS:,}$"):
        read_image_size(bomb)
    exif = Image.Exif()
    exif[0x0112] = 6  # displayed turned by 90 degrees
    Image.fromarray(np.zeros((30, 50, 3), np.uint8)).save(tmp_path / "turned.jpg", exif=exif)
    assert read_image_size(tmp_path / "turned.jpg") == (50, 30) == read_image(tmp_path / "turned.jpg").shape[:2]

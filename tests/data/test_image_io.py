"""Reading and writing image files: any file name, one pixel limit checked before decoding, and the decoder
training uses (what the scan verifies is what training decodes)."""

import os
import time

import cv2
import numpy as np
import pytest
from tests.reliability.corpus import NON_UTF8_NAME, jpeg_bytes, png_declaring, tiff_opencv_cannot_decode

from tphyolo.data.image_io import MAX_IMAGE_PIXELS, ImageError, read_image, verify_image, write_image


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


def test_a_small_file_declaring_a_huge_image_is_refused_before_decoding(tmp_path):
    for width, height in ((40000, 40000), (12000, 12000)):  # above PIL's own limit, and between the two
        path = tmp_path / f"bomb{width}.png"
        path.write_bytes(png_declaring(width, height))
        assert path.stat().st_size < 1024
        start = time.perf_counter()
        with pytest.raises(ImageError, match=f"{path.name}: declares .*pixels, over the limit of {MAX_IMAGE_PIXELS:,}"):
            read_image(path)
        with pytest.raises(ImageError, match="over the limit"):
            verify_image(path)
        assert time.perf_counter() - start < 1


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
    assert any("truncated JPEG" in note for note in verify_image(path).notes)

"""Split reports: the warning given when validation samples are also training samples."""

from tphyolo.data.report import shared_images_warning


def test_validation_files_that_are_training_files_are_counted():
    message = shared_images_warning(["a.jpg", "b.jpg", "c.jpg"], ["b.jpg", "c.jpg", "d.jpg", "e.jpg"])
    assert message.startswith("2 of the 4 validation images are also training images")
    assert "flatter" in message
    assert shared_images_warning(["a.jpg"], ["b.jpg"]) == ""

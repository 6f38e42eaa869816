"""One-line error descriptions: the file first, then the cause as a user reads it."""

import errno
import os

import pytest

from tphyolo.errors import InputError, UsageError, describe_error
from tphyolo.yaml_files import load_yaml_text


def test_os_errors_name_the_file_and_the_cause():
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "runs/exp/weights/last.pt")
    assert describe_error(full) == "runs/exp/weights/last.pt: no space left on device"
    read_only = OSError(errno.EROFS, os.strerror(errno.EROFS), "data/labels.cache.json")
    assert describe_error(read_only) == "data/labels.cache.json: read-only file system"
    moved = OSError(errno.EACCES, os.strerror(errno.EACCES), "a.tmp", None, "a.pt")
    assert describe_error(moved) == "a.tmp -> a.pt: permission denied"
    assert describe_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))) == "no space left on device"


def test_a_worker_traceback_becomes_its_last_line():
    text = (
        "Caught ImageError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\ntphyolo.data.image_io.ImageError: /d/images/a.jpg: cannot decode image'
    )
    assert describe_error(ValueError(text)) == "/d/images/a.jpg: cannot decode image"
    assert describe_error(ValueError("one\ntwo\nthree")) == "one (+2 more line(s))"
    assert describe_error(KeyError()) == "KeyError"


def test_the_package_s_errors_of_bad_input_are_input_errors_and_value_errors():
    from tphyolo.checkpoint.errors import CheckpointError
    from tphyolo.checkpoint.legacy.errors import ForbiddenGlobalError
    from tphyolo.classify.checkpoint import ClassifierCheckpointError
    from tphyolo.data.files.image_io import ImageError, ImageTooLargeError
    from tphyolo.data.files.raster import RasterReadError
    from tphyolo.data.labels import LabelError
    from tphyolo.imports import MissingExtraError
    from tphyolo.runtime.install import BrokenInstallError

    kinds = (UsageError, CheckpointError, ForbiddenGlobalError, ClassifierCheckpointError, ImageError,
             ImageTooLargeError, RasterReadError, LabelError, MissingExtraError, BrokenInstallError)  # fmt: skip
    assert [kind.__name__ for kind in kinds if not issubclass(kind, InputError)] == []
    assert issubclass(InputError, ValueError)


def test_invalid_yaml_is_an_input_error_naming_its_origin():
    with pytest.raises(InputError, match=r"^data.yaml: invalid yaml"):
        load_yaml_text("a: [1, 2", "data.yaml")

"""The service's model hash: 16 hex digits of one SHA-256 over the bytes of every weights file, in order."""

import hashlib

from tests.helpers import weights_file_and_folder

from tphyolo.serve.engine import weights_hash


def test_the_hash_covers_each_file_and_a_folders_files_by_path(tmp_path):
    weights, folder = weights_file_and_folder(tmp_path)
    assert weights_hash([str(weights), str(folder), str(tmp_path / "missing")]) == "f8e22946f6925b47"
    # a folder's files in sorted path order (model/sub/y.bin before model/x.bin), their bytes alone
    assert weights_hash([str(folder)]) == hashlib.sha256(b"yy" + b"x" * 10).hexdigest()[:16] == "33ad66fc4324f52c"

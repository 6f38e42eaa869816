"""`file_sha256` and `update_with_file`: a file's bytes hashed in chunks give the digest of the bytes at once."""

import hashlib

import pytest

from tphyolo.data.files.digest import CHUNK, file_sha256, update_with_file

# sha256sum of the three bytes "abc" and of an empty file (FIPS 180-2's test vector; the empty string's digest)
ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def three_chunks_and_a_tail() -> bytes:
    return bytes(range(256)) * (3 * CHUNK // 256) + b"tail"


def test_the_sha256_of_a_file_is_sha256sums(tmp_path):
    (tmp_path / "abc").write_bytes(b"abc")
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "big").write_bytes(three_chunks_and_a_tail())
    assert file_sha256(tmp_path / "abc") == ABC
    assert file_sha256(str(tmp_path / "empty")) == EMPTY
    assert file_sha256(tmp_path / "big") == "5bf6b96827922a540a8d59abd399917cb998da0266f6bfc84930b0603d980670"


@pytest.mark.parametrize("chunk", [1, 7, CHUNK - 1, CHUNK, 4 * CHUNK])
def test_any_chunk_size_feeds_the_same_bytes_after_what_the_digest_held(tmp_path, chunk):
    data = three_chunks_and_a_tail() if chunk > 7 else b"a short file of 31 bytes, odd.\n"
    (tmp_path / "file").write_bytes(data)
    digest = hashlib.sha256(b"prefix")
    update_with_file(digest, tmp_path / "file", chunk=chunk)
    assert digest.hexdigest() == hashlib.sha256(b"prefix" + data).hexdigest()


def test_what_is_not_a_readable_file_raises_as_open_does(tmp_path):
    with pytest.raises(FileNotFoundError):
        file_sha256(tmp_path / "missing")
    with pytest.raises(IsADirectoryError):
        update_with_file(hashlib.sha256(), tmp_path)

"""A resume record's weights digests: a file's SHA-256, a folder's over its files' names and bytes, a name itself."""

from tests.helpers import weights_file_and_folder

from tphyolo.predict.runner.resume import weights_digests


def test_the_digest_of_a_file_a_folder_and_a_release_name(tmp_path):
    weights, folder = weights_file_and_folder(tmp_path)
    assert weights_digests([str(weights), str(folder), "yolov5n"]) == {
        str(weights): "5bf6b96827922a540a8d59abd399917cb998da0266f6bfc84930b0603d980670",  # sha256sum a.pt
        str(folder): "fbda480c670b4dd31fb4ff6bf23bfab83340fb4c842c403d43c973bfc2764bac",
        "yolov5n": "yolov5n",
    }

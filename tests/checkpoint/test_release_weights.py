"""YOLOv5 release weights by name: downloaded once into the user cache from TPHYOLO_ASSETS_URL, checked, and
loaded through the restricted loader; without network, an error that says what to fetch and where to put it."""

import functools
import http.server
import socket
import threading

import pytest
from tests.helpers import save_model_checkpoint

from tphyolo.checkpoint import release as release_weights
from tphyolo.checkpoint.format import CheckpointError, load_checkpoint
from tphyolo.models import build_model


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A local HTTP server of the folder `served/`, its URL as TPHYOLO_ASSETS_URL, a fresh user cache, and a
    working folder without weights; yields (served folder, list of requested paths)."""
    served = tmp_path / "served"
    served.mkdir()
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            requests.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(served)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("TPHYOLO_ASSETS_URL", f"http://127.0.0.1:{httpd.server_address[1]}/assets/")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (served / "assets").mkdir()
    yield served / "assets", requests
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _serve_model(folder, name="yolov5n.pt"):
    model = build_model("yolov5n", names=("a", "b"))
    return save_model_checkpoint(folder / name, model, ("a", "b"))


def test_a_release_name_downloads_once_into_the_cache_and_loads(server, tmp_path, capsys):
    folder, requests = server
    _serve_model(folder)
    ckpt = load_checkpoint("yolov5n.pt")
    cached = tmp_path / "cache" / "tphyolo" / "weights" / "yolov5n.pt"
    assert ckpt.path == cached and ckpt.names == ["a", "b"] and requests == ["/assets/yolov5n.pt"]
    assert "downloading yolov5n.pt" in capsys.readouterr().err  # the progress bar
    assert load_checkpoint("yolov5n.pt").path == cached and len(requests) == 1  # from the cache now
    assert list(cached.parent.iterdir()) == [cached]


def test_a_local_file_of_that_name_wins(server, tmp_path):
    folder, requests = server
    local = _serve_model(tmp_path / "work")
    assert load_checkpoint("yolov5n.pt").path.resolve() == local.resolve() and requests == []


@pytest.mark.parametrize("problem", ["sha256", "not a checkpoint"])
def test_a_wrong_download_is_refused_and_not_cached(server, tmp_path, monkeypatch, problem):
    folder, _ = server
    if problem == "sha256":
        _serve_model(folder)
        monkeypatch.setitem(release_weights.RELEASE_SHA256, "yolov5n.pt", "0" * 64)
        match = "sha256 .* is not the release file's 000"
    else:
        (folder / "yolov5n.pt").write_bytes(b"<html>a login page</html>")
        match = "the download is not usable weights"
    with pytest.raises(CheckpointError, match=match):
        load_checkpoint("yolov5n.pt")
    weights = tmp_path / "cache" / "tphyolo" / "weights"
    assert list(weights.iterdir()) == []


def test_without_network_the_error_says_what_to_download_and_where(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TPHYOLO_ASSETS_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        load_checkpoint("yolov5x.pt")
    message = str(error.value)
    assert f"http://127.0.0.1:{port}/yolov5x.pt" in message
    assert str(tmp_path / "cache" / "tphyolo" / "weights" / "yolov5x.pt") in message and "TPHYOLO_ASSETS_URL" in message


def test_other_missing_names_are_plain_missing_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not release_weights.is_release_name("runs/yolov5s.pt") and not release_weights.is_release_name("a.pt")
    with pytest.raises(FileNotFoundError, match="checkpoint not found: yolov6s.pt"):
        load_checkpoint("yolov6s.pt")

"""Streams (a video URL served over HTTP from 127.0.0.1, a webcam index) and the video frame stride."""

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import cv2
import numpy as np
import pytest
import torch

from tphyolo.data.files.image_io import ImageError
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.sources import Stream, count_frames, iter_frames, resolve_source

FRAMES = 7


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    """A 7-frame MJPG clip whose frame k is grey level 30 k."""
    path = tmp_path_factory.mktemp("video") / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (96, 64))
    for k in range(FRAMES):
        writer.write(np.full((64, 96, 3), 30 * k, np.uint8))
    writer.release()
    return path


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def video_url(video):
    """The clip served by an HTTP server on 127.0.0.1 in a thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(video.parent)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/{video.name}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def predictor():
    torch.manual_seed(0)
    return Predictor(build_model("yolov5n", num_classes=2).eval(), imgsz=64, conf=0.001, device="cpu", batch=2)


def _grey_levels(frames) -> list[int]:
    return [round(float(f.image.mean()) / 30) for f in frames]


def test_a_video_file_is_read_every_nth_frame(video):
    frames = list(iter_frames([video], vid_stride=3))
    assert [f.index for f in frames] == [0, 3, 6] and _grey_levels(frames) == [0, 3, 6]
    assert frames[0].fps == pytest.approx(10.0 / 3)  # the rate of the frames yielded
    assert count_frames([video], vid_stride=3) == 3 and count_frames([video]) == FRAMES
    with pytest.raises(ValueError, match="vid_stride"):
        next(iter_frames([video], vid_stride=0))


def test_a_video_url_is_a_stream_read_through_opencv(video_url):
    (stream,) = resolve_source(video_url)
    assert stream == Stream(video_url) and stream.target == video_url
    assert count_frames([stream]) is None  # a stream's length is unknown
    frames = list(iter_frames([stream], vid_stride=2))
    assert [f.index for f in frames] == [0, 2, 4, 6] and _grey_levels(frames) == [0, 2, 4, 6]
    assert all(f.is_video and f.path == video_url and f.name == stream.name for f in frames)
    assert stream.name.endswith("clip.avi") and "/" not in stream.name


def test_predictor_streams_a_url_and_keeps_its_frames(predictor, video_url):
    results = predictor(video_url, vid_stride=3)
    assert [r.frame for r in results] == [1, 4, 7] and all(r.path == video_url for r in results)
    assert all(r.image is not None and r.shape == (64, 96) for r in results)  # a stream cannot be read again
    assert [round(float(r.image.mean()) / 30) for r in results] == [0, 3, 6]


def test_a_webcam_index_is_a_stream_unless_a_file_has_that_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (camera,) = resolve_source("0")
    assert camera == Stream("0") and camera.target == 0 and camera.name == "webcam0"
    (tmp_path / "0").mkdir()
    cv2.imwrite(str(tmp_path / "0" / "a.jpg"), np.zeros((8, 8, 3), np.uint8))
    assert [p.as_posix() for p in resolve_source("0")] == ["0/a.jpg"]  # the folder named 0 wins


def test_a_stream_that_does_not_open_is_one_error_naming_it():
    with pytest.raises(ImageError, match="^97: cannot open stream"):
        next(iter_frames([Stream("97")]))
    skipped = []
    assert list(iter_frames([Stream("97")], on_skip=lambda f, e: skipped.append((f, str(e))))) == []
    assert skipped == [(Stream("97"), "97: cannot open stream")]


@pytest.mark.slow
def test_the_predict_command_reads_a_video_url(video_url, tmp_path, capsys):
    from tests.helpers import save_model_checkpoint

    from tphyolo.cli import main

    torch.manual_seed(0)
    names = ["car", "bus"]  # VisDrone classes: --save-visdrone maps them by name
    weights = save_model_checkpoint(tmp_path / "tiny.pt", build_model("yolov5n", names=names), names)
    argv = ["predict", "--weights", str(weights), "--source", video_url, "--img", "64", "--device", "cpu"]
    argv += ["--vid-stride", "3", "--save-visdrone", "--project", str(tmp_path), "--name", "s"]
    assert main(argv) == 0
    name = Stream(video_url).name
    written = sorted(p.name for p in (tmp_path / "s" / "visdrone").iterdir())
    assert written == [f"{name}_000000.txt", f"{name}_000003.txt", f"{name}_000006.txt"]
    capture = cv2.VideoCapture(str(tmp_path / "s" / f"{name}.mp4"))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 3
    capture.release()


def test_results_of_a_video_file_read_their_frame_again(predictor, video):
    results = predictor(video, vid_stride=3)
    assert [r.frame for r in results] == [1, 4, 7] and all(r.image is None and r.path == video for r in results)
    assert [round(float(r.load_image().mean()) / 30) for r in results] == [0, 3, 6]

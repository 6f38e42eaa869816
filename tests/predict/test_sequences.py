"""How a tracking source falls into sequences, and the frame numbers of their frames."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from tphyolo.predict.sequences import image_frame_number, resolve_sequences
from tphyolo.predict.sources import Frame, Stream


def frames(folder: Path, names: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        cv2.imwrite(str(folder / name), np.zeros((8, 8, 3), np.uint8))
    return [folder / n for n in names]


def video(path: Path, count: int = 3) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 5, (16, 16))
    for _ in range(count):
        writer.write(np.zeros((16, 16, 3), np.uint8))
    writer.release()
    return path


def summary(sequences):
    return [(s.name, [Path(str(f)).name for f in s.files]) for s in sequences]


def test_a_folder_of_frames_is_one_sequence(tmp_path):
    frames(tmp_path / "uav01", ["0000002.jpg", "0000001.jpg"])
    assert summary(resolve_sequences(tmp_path / "uav01")) == [("uav01", ["0000001.jpg", "0000002.jpg"])]


def test_folders_of_sequences_visdrone_and_motchallenge(tmp_path):
    frames(tmp_path / "sequences" / "b", ["1.jpg"])
    frames(tmp_path / "sequences" / "a", ["1.jpg", "2.jpg"])
    (tmp_path / "sequences" / "notes").mkdir()  # a folder without images is not a sequence
    assert summary(resolve_sequences(tmp_path / "sequences")) == [("a", ["1.jpg", "2.jpg"]), ("b", ["1.jpg"])]
    frames(tmp_path / "MOT17" / "MOT17-02" / "img1", ["000001.jpg"])
    (tmp_path / "MOT17" / "MOT17-02" / "gt").mkdir()
    assert summary(resolve_sequences(tmp_path / "MOT17")) == [("MOT17-02", ["000001.jpg"])]
    with pytest.raises(FileNotFoundError, match="nor folders of images"):
        resolve_sequences(tmp_path / "sequences" / "notes")


def test_videos_globs_lists_and_unique_names(tmp_path):
    video(tmp_path / "clips" / "one.mp4")
    video(tmp_path / "clips" / "two.mp4")
    assert summary(resolve_sequences(tmp_path / "clips")) == [("one", ["one.mp4"]), ("two", ["two.mp4"])]
    frames(tmp_path / "x" / "cam", ["1.jpg", "2.jpg"])
    frames(tmp_path / "y" / "cam", ["1.jpg"])
    found = resolve_sequences(str(tmp_path / "*" / "cam" / "*.jpg"))
    assert summary(found) == [("cam", ["1.jpg", "2.jpg"]), ("cam_2", ["1.jpg"])]
    both = resolve_sequences([tmp_path / "clips" / "one.mp4", Stream("0")])
    assert [s.name for s in both] == ["one", "webcam0"]


def test_frame_numbers():
    [sequence] = resolve_sequences([Stream("rtsp://cam/live")])
    image = np.zeros((2, 2, 3), np.uint8)
    assert sequence.frame_number(Frame(image, "rtsp://cam/live", 40, fps=10.0), 3) == 41  # a video frame's index
    assert image_frame_number(Path("0000017.jpg"), 0) == 17  # the MOT benchmarks' names
    assert image_frame_number(Path("frame_a.jpg"), 4) == 5 and image_frame_number(Path("000.jpg"), 4) == 5

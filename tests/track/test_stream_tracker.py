"""`tphyolo.Tracker`: a detector and a tracker over whole sources, in three lines; measured against detectors that
know the answer (bright squares found by their pixels in a generated video; the synthetic-mot ground truth) and
against precomputed detections whose categories are known."""

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from oracle import OraclePredictor

from tphyolo.data.builtin.synthetic_mot import generate_synthetic_mot
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.mot.sequences import read_ground_truth, tracking_split
from tphyolo.data.mot.table import TrackTable
from tphyolo.infer.config import InferenceConfig
from tphyolo.metrics.tracking import evaluate_tables
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.results import Results
from tphyolo.track.registry import make_tracker

FRAMES, SIZE = 12, 16  # the generated video: FRAMES frames, squares of SIZE pixels


def square_boxes(frame: int) -> np.ndarray:
    """The true (2, 4) xyxy boxes of the two squares in `frame` (from 0): one moving right, one moving down."""
    corners = np.array([[20 + 6 * frame, 30], [150, 10 + 5 * frame]], dtype=np.float64)
    return np.hstack([corners, corners + SIZE])


class SquarePredictor(Predictor):
    """Detections = the bright squares of the frame, found by thresholding (class 0 for the first square's
    column band, 1 for the other), score 0.9."""

    def __init__(self) -> None:  # no model: nothing of Predictor.__init__ is needed
        self.config = InferenceConfig(conf=0.1)

    @property
    def names(self) -> list[str]:
        return ["mover", "faller"]

    def predict_images(self, images):
        out = []
        for image in images:
            mask = (cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) > 128).astype(np.uint8)
            count, _, stats, _ = cv2.connectedComponentsWithStats(mask)
            boxes = np.array([[x, y, x + w, y + h] for x, y, w, h, area in stats[1:count] if area > 50], np.float32)
            boxes = boxes.reshape(-1, 4)
            labels = (boxes[:, 0] >= 140).astype(np.int64)
            out.append(Results(torch.from_numpy(boxes), torch.full((len(boxes),), 0.9), torch.from_numpy(labels),
                               names=tuple(self.names), shape=image.shape[:2], image=image))  # fmt: skip
        return out


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("video") / "drone.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (256, 128))
    assert writer.isOpened()
    for frame in range(FRAMES):
        image = np.full((128, 256, 3), 30, np.uint8)
        for x1, y1, x2, y2 in square_boxes(frame).astype(int).tolist():
            image[y1:y2, x1:x2] = 230
        writer.write(image)
    writer.release()
    return path


def test_tracker_follows_the_squares_of_a_video_in_three_lines(video):
    from tphyolo import Tracker

    results = list(Tracker(SquarePredictor(), tracker="bytetrack")(video))
    assert [r.frame for r in results] == list(range(1, FRAMES + 1))  # numbered as the MOT files number them
    assert all(len(r) == 2 for r in results) and results[0].image.shape == (128, 256, 3)
    ids = {}  # class -> the track ids it was given over the video
    for r in results:
        truth = square_boxes(r.frame - 1)
        for box, track_id, label in zip(r.boxes.numpy(), r.ids.tolist(), r.labels.tolist(), strict=True):
            np.testing.assert_allclose(box, truth[label], atol=2.5)  # the tracker's box on its square
            ids.setdefault(label, set()).add(track_id)
    assert sorted(len(s) for s in ids.values()) == [1, 1] and ids[0] != ids[1]  # one id per square, all along


def test_tracker_restarts_per_sequence_and_scores_as_the_truth(tmp_path):
    split = tracking_split(load_data_config(generate_synthetic_mot(tmp_path, n_train=0, n_val=2, length=10, seed=4)))
    from tphyolo import Tracker

    results = list(Tracker(OraclePredictor(split), tracker="botsort")(split.folder / "sequences"))
    first, second = results[:10], results[10:]
    assert len(results) == 20 and [r.frame for r in second] == list(range(1, 11))
    assert min(r.ids.min().item() for r in second if len(r)) == 1  # ids start again at the second sequence
    truth = {s.name: s.truth for s in read_ground_truth(split.annotations, split.fmt)}
    outputs = {
        name: TrackTable.concatenate([
            TrackTable.from_columns(np.full(len(r), r.frame), r.ids, r.boxes, r.scores, r.labels + 1) for r in part
        ])
        for name, part in (("val-000", first), ("val-001", second))
    }  # fmt: skip
    combined = evaluate_tables(truth, outputs, fmt="visdrone-mot").combined
    assert combined["IDSW"] == 0 and combined["HOTA"] > 90


def test_tracker_on_precomputed_detections_gives_classes_by_visdrone_category(tmp_path):
    from tphyolo import Tracker

    (tmp_path / "dets").mkdir()
    lines = [f"{f},-1,{10 + 2 * f},10,20,12,0.9,4,-1,-1\n{f},-1,{100 + 2 * f},60,6,14,0.8,1,-1,-1" for f in range(1, 6)]
    (tmp_path / "dets" / "seq.txt").write_text("\n".join(lines) + "\n")
    results = list(Tracker(detections=tmp_path / "dets", tracker=make_tracker("ocsort", min_hits=1))())
    assert [r.frame for r in results] == [1, 2, 3, 4, 5] and results[0].names[3] == "car"  # the files' numbers
    last = results[-1]
    label_of = dict(zip(last.ids.tolist(), last.labels.tolist(), strict=True))
    assert sorted(label_of) == [1, 2] and sorted(label_of.values()) == [0, 3]  # car (4) -> 3, pedestrian (1) -> 0
    np.testing.assert_allclose(last.boxes[last.labels == 3].numpy(), [[20, 10, 40, 22]], atol=1e-6)


def test_tracker_refuses_what_it_cannot_track(tmp_path):
    from tphyolo import Tracker

    with pytest.raises(ValueError, match="give weights"):
        Tracker(tracker="bytetrack")
    with pytest.raises(ValueError, match="detector settings"):
        Tracker(detections=tmp_path, imgsz=640)
    (tmp_path / "dets").mkdir()
    (tmp_path / "dets" / "s.txt").write_text("1,-1,0,0,5,5,0.9,-1,-1,-1\n")
    with pytest.raises(ValueError, match="compensates camera motion"):
        Tracker(detections=tmp_path / "dets", tracker="botsort").sequences()


def test_class_ids_read_visdrone_categories_and_refuse_the_others():
    from tphyolo.track.stream import class_ids

    # 1 pedestrian .. 10 motor are classes 0..9; 0 (ignored region), 11 (others) and -1 (none) are no class
    assert class_ids(np.array([1, 4, 10, 0, 11, -1])).tolist() == [0, 3, 9, -1, -1, -1]

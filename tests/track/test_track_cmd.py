"""Tracking end to end: `Predictor.track` and `tphyolo track` (with a detector that knows the answer, with a real
tiny model, and on precomputed detections), their output files, and `tphyolo eval --task track` on them."""

from dataclasses import asdict

import numpy as np
import pytest
import torch
import yaml
from oracle import OraclePredictor
from tests.helpers import save_model_checkpoint

from tphyolo.cli import main
from tphyolo.data.builtin.synthetic_mot import generate_synthetic_mot
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.mot.motchallenge import read_mot
from tphyolo.data.mot.sequences import read_ground_truth, tracking_split
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.visdrone_mot import read_visdrone_mot, write_visdrone_mot
from tphyolo.metrics.tracking import evaluate_tables
from tphyolo.models import build_model
from tphyolo.runtime.run_dir import OutputDir, job_from_data
from tphyolo.track.job import TrackerChoice, TrackInputs, TrackJob, TrackOutputs
from tphyolo.track.registry import tracker_settings
from tphyolo.track.tracker import ByteTracker


@pytest.fixture(scope="module")
def video_set(tmp_path_factory):
    """A synthetic-mot data yaml: no train sequences, two val sequences of 10 frames."""
    return generate_synthetic_mot(tmp_path_factory.mktemp("video-set"), n_train=0, n_val=2, length=10, seed=4)


@pytest.fixture(scope="module")
def split(video_set):
    return tracking_split(load_data_config(video_set), "val")


def test_predictor_track_streams_results_with_ids_and_restarts_per_sequence(split):
    predictor = OraclePredictor(split)
    results = list(predictor.track(split.folder / "sequences", ByteTracker("botsort")))
    assert len(results) == 20 and predictor.calls == 20
    first, second = results[:10], results[10:]
    assert [r.frame for r in first] == list(range(1, 11)) and [r.frame for r in second] == list(range(1, 11))
    assert min(r.ids.min().item() for r in second if len(r)) == 1  # the tracker started afresh
    record = first[3].to_dict()["detections"][0]
    assert set(record) == {"box", "score", "class", "name", "id"} and record["id"] >= 1
    assert (np.diff(first[3].scores.numpy()) <= 0).all()  # Results stay sorted by score
    assert first[3].plot().shape == first[3].image.shape
    truth = {s.name: s.truth for s in read_ground_truth(split.annotations, split.fmt)}
    outputs = {}
    for name, part in (("val-000", first), ("val-001", second)):
        outputs[name] = TrackTable.concatenate([
            TrackTable.from_columns(np.full(len(r), r.frame), r.ids, r.boxes, r.scores, r.labels + 1) for r in part
        ])  # fmt: skip
    combined = evaluate_tables(truth, outputs, fmt="visdrone-mot").combined
    assert combined["IDSW"] == 0 and combined["HOTA"] > 90


def test_track_command_on_a_data_set_writes_files_and_scores_them(split, video_set, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("tphyolo.predict.predictor.Predictor.from_spec", lambda spec, **kw: OraclePredictor(split))
    argv = ["track", "--weights", "oracle", "--data", str(video_set), "--tracker", "botsort", "--save-mot",
            "--device", "cpu", "--project", str(tmp_path), "--name", "run"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "val-000: " in out and "10 frames" in out and "combined" in out and "HOTA" in out
    run = tmp_path / "run"
    mot, visdrone = read_mot(run / "mot" / "val-000.txt"), read_visdrone_mot(run / "visdrone" / "val-000.txt")
    assert len(mot) == len(visdrone) > 20 and set(visdrone.classes.tolist()) <= set(range(1, 11))
    np.testing.assert_allclose(mot.boxes, visdrone.boxes)
    assert len(list((run / "val-000").glob("*.jpg"))) == 10  # drawn frames, named as the source's
    scores = tmp_path / "scores.json"
    assert main(["eval", "--task", "track", "--data", str(video_set), "--pred", str(run / "visdrone"),
                 "--json", str(scores)]) == 0  # fmt: skip
    assert '"combined"' in scores.read_text() and "IDF1" in capsys.readouterr().out


def test_track_command_on_public_detections_with_and_without_frames(split, tmp_path, capsys):
    for sequence in read_ground_truth(split.annotations, split.fmt):
        name = sequence.name
        objects = sequence.truth.select((sequence.truth.ids > 0) & (sequence.truth.classes <= 10))
        detections = TrackTable.from_columns(objects.frames, None, objects.boxes, np.full(len(objects), 0.8),
                                             objects.classes)  # fmt: skip
        write_visdrone_mot(tmp_path / "dets" / f"{name}.txt", detections)
    argv = ["track", "--detections", str(tmp_path / "dets"), "--save-visdrone", "--project", str(tmp_path)]
    assert main(argv + ["--source", str(split.folder / "sequences"), "--tracker", "botsort", "--name", "a"]) == 0
    assert (tmp_path / "a" / "val-001").is_dir()  # frames drawn
    err = capsys.readouterr().err
    assert "track: 100%" in err and "20/20" in err  # a bar over the source's 20 frames
    saved = yaml.safe_load((tmp_path / "a" / "args.yaml").read_text())
    job = job_from_data(TrackJob, saved["job"], where="args.yaml")  # the job, its paths absolute
    assert job.inputs.detections == str(tmp_path / "dets") and job.choice.tracker == "botsort"
    inputs = TrackInputs(source=str(split.folder / "sequences"), detections=str(tmp_path / "dets"))
    assert job == TrackJob(inputs=inputs, choice=TrackerChoice("botsort"), outputs=TrackOutputs(save_visdrone=True),
                           output=OutputDir(str(tmp_path), "a"))  # fmt: skip
    assert saved["tracker"] == asdict(tracker_settings("botsort"))  # every setting the tracker ran with
    assert main(argv + ["--tracker", "bytetrack", "--no-save-img", "--name", "b"]) == 0  # no frames needed
    assert not (tmp_path / "b" / "val-001").exists()
    hota = {}
    for run in ("a", "b"):
        capsys.readouterr()
        assert main(["eval", "--task", "track", "--gt", str(split.annotations), "--pred",
                     str(tmp_path / run / "visdrone")]) == 0  # fmt: skip
        table = capsys.readouterr().out.splitlines()
        hota[run] = float(next(line for line in table if line.startswith("combined")).split()[1])
    assert hota["a"] > 90 and hota["b"] < hota["a"] - 5  # the frames' camera motion helps through the jitter


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--source", "x"], "give --weights (a detector) or --detections"),
        (["--weights", "w.pt", "--detections", "d"], "give --weights (a detector) or --detections"),
        (["--weights", "w.pt"], "give --source or --data"),
        (["--detections", "{dets}", "--tracker", "botsort"], "compensates camera motion (sparse) from the frames"),
        (["--detections", "{dets}", "--tracker", "{yaml}"], "unknown tracker setting(s) ['speed']"),
    ],
)
def test_track_command_errors_are_one_line(tmp_path, capsys, argv, message):
    (tmp_path / "dets").mkdir()
    (tmp_path / "dets" / "s.txt").write_text("1,-1,0,0,5,5,0.9,-1,-1,-1\n")
    (tmp_path / "t.yaml").write_text("speed: 2\n")
    argv = [a.format(dets=tmp_path / "dets", yaml=tmp_path / "t.yaml") for a in argv]
    assert main(["track", *argv, "--project", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tphyolo track: error: ") and message in err[0]


def test_eval_track_refuses_detection_flags(tmp_path, capsys):
    assert main(["eval", "--task", "track", "--gt", str(tmp_path), "--pred", str(tmp_path), "--protocol", "coco"]) == 2
    assert "--protocol score detections" in capsys.readouterr().err


@pytest.mark.slow
def test_track_command_with_a_real_model_on_a_video(split, tmp_path, capsys):
    """The detector path with a tiny untrained model on a video: files of the right form, one per sequence."""
    import cv2

    torch.manual_seed(0)
    weights = save_model_checkpoint(tmp_path / "tiny.pt", build_model("yolov5n", num_classes=3), ["a", "b", "c"])
    frames = sorted(split.sequences["val-000"].glob("*.jpg"))
    video = cv2.VideoWriter(str(tmp_path / "clip.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 10, (640, 384))
    for path in frames:
        video.write(cv2.imread(str(path)))
    video.release()
    settings = tmp_path / "eager.yaml"  # an untrained model scores low: track whatever it finds
    settings.write_text("track_high_thresh: 0.001\ntrack_low_thresh: 0.0\nnew_track_thresh: 0.001\n")
    argv = ["track", "--weights", str(weights), "--source", str(tmp_path / "clip.mp4"), "--img", "128",
            "--conf", "0.001", "--tracker", str(settings), "--save-mot", "--device", "cpu", "--project",
            str(tmp_path), "--name", "run"]  # fmt: skip
    assert main(argv) == 0
    assert "clip: " in capsys.readouterr().out
    rows = np.loadtxt(tmp_path / "run" / "mot" / "clip.txt", delimiter=",", ndmin=2)
    assert rows.shape[1] == 10 and (rows[:, 1] >= 1).all() and set(rows[:, 0]) <= set(range(1, 11))
    assert (tmp_path / "run" / "clip.mp4").stat().st_size > 0

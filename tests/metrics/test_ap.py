import numpy as np
import pytest
import torch

from tphyolo.metrics.ap import (
    IOU_THRESHOLDS,
    DetectionStats,
    ap_per_class,
    compute_ap,
    fitness,
    match_predictions,
)
from tphyolo.metrics.confusion import ConfusionMatrix


def test_compute_ap_pinned_values():
    ap, _, _ = compute_ap(np.array([1.0]), np.array([1.0]))
    assert ap == pytest.approx(0.995)  # the last of 101 samples falls on the closing sentinel
    # one hit then one miss on two labels: envelope 1 up to recall 0.5, then a line from 0.5 to 0 at recall 1;
    # samples at 0..0.49 read 1, at 0.5 the later duplicate point 0.5, then 1 - x: 0.49 + 0.0075 + 0.00495 +
    # 0.12005 = 0.6225
    ap, _, _ = compute_ap(np.array([0.5, 0.5]), np.array([1.0, 0.5]))
    assert ap == pytest.approx(0.6225)


def test_match_predictions_one_to_one():
    labels = torch.tensor([[0, 0.0, 0.0, 10.0, 10.0], [1, 20.0, 20.0, 30.0, 30.0]])
    dets = torch.tensor(
        [
            [0.0, 0.0, 10.0, 8.7, 0.9, 0],  # IoU 0.87 with label 0
            [0.0, 0.0, 10.0, 10.0, 0.5, 0],  # IoU 1.0 with label 0, yet the label goes to prediction 0
            [20.0, 20.0, 30.0, 30.0, 0.7, 0],  # wrong class
            [20.0, 20.0, 30.0, 26.0, 0.6, 1],  # IoU 0.6 with label 1
        ]
    )
    correct = match_predictions(dets, labels, IOU_THRESHOLDS)
    # YOLOv5 v6.0: after keeping each prediction's best label, a label goes to its lowest-index prediction
    assert correct[0].tolist() == [True] * 8 + [False] * 2
    assert correct[1].tolist() == [False] * 10
    assert correct[2].tolist() == [False] * 10
    assert correct[3].tolist() == [True, True, True] + [False] * 7  # 0.5, 0.55, 0.6 reached


def test_dataset_summary_and_table():
    stats = DetectionStats(num_classes=2)
    labels = torch.tensor([[0, 0.0, 0.0, 10.0, 10.0], [1, 20.0, 20.0, 30.0, 30.0]])
    stats.update(torch.tensor([[0.0, 0.0, 10.0, 10.0, 0.9, 0], [20.0, 20.0, 30.0, 30.0, 0.8, 1]]), labels)
    stats.update(torch.zeros(0, 6), torch.tensor([[0, 50.0, 50.0, 60.0, 60.0]]))  # a missed object
    s = stats.summarize()
    # class 0: one hit of two labels -> recall 0.5, AP = 0.5 * 1 + half a sample step = 0.5 + 0.005 * 1
    ap0 = compute_ap(np.array([0.5]), np.array([1.0]))[0]
    assert s.map50 == pytest.approx((ap0 + 0.995) / 2)
    assert s.map == pytest.approx(s.map50)
    assert s.mr == pytest.approx(0.75, abs=1e-3)
    assert s.fitness == pytest.approx(fitness(s.map50, s.map))
    table = s.table(["car", "bus"]).splitlines()
    assert table[0].split() == ["Class", "Images", "Labels", "P", "R", "mAP@.5", "mAP@.5:.95"]
    assert table[1].split()[:3] == ["all", "2", "3"]
    assert [line.split()[0] for line in table[2:]] == ["car", "bus"]
    # a class row counts the images holding the class (the bus is in one of the two), as ultralytics prints it
    assert [line.split()[1:3] for line in table[2:]] == [["2", "2"], ["1", "1"]]


def test_ap_per_class_ignores_classes_without_predictions():
    res = ap_per_class(np.ones((1, 10), bool), np.array([0.9]), np.array([0]), np.array([0, 1]))
    assert res.classes.tolist() == [0, 1]
    assert res.ap[1].tolist() == [0.0] * 10
    assert res.ap[0, 0] == pytest.approx(0.995)


def test_confusion_matrix_counts():
    cm = ConfusionMatrix(num_classes=2)
    labels = torch.tensor([[0, 0.0, 0.0, 10.0, 10.0], [1, 20.0, 20.0, 30.0, 30.0], [1, 50.0, 50.0, 60.0, 60.0]])
    dets = torch.tensor(
        [
            [0.0, 0.0, 10.0, 10.0, 0.9, 1],  # label 0 seen as class 1
            [20.0, 20.0, 30.0, 30.0, 0.8, 1],  # correct
            [80.0, 80.0, 90.0, 90.0, 0.7, 0],  # background seen as class 0
            [50.0, 50.0, 60.0, 60.0, 0.1, 1],  # below conf: label 2 missed
        ]
    )
    cm.update(dets, labels)
    assert cm.matrix.tolist() == [[0, 0, 1], [1, 1, 0], [0, 1, 0]]
    assert cm.normalized()[:, 1].tolist() == [0, 0.5, 0.5]


@pytest.mark.slow
def test_plots_written_without_touching_the_backend(tmp_path):
    import matplotlib

    from tphyolo.metrics.plots import plot_confusion_matrix, plot_curves

    backend = matplotlib.get_backend()
    rng = np.random.default_rng(0)
    tp = rng.random((40, 10)) > 0.4
    res = ap_per_class(tp, rng.random(40), rng.integers(0, 3, 40), rng.integers(0, 3, 30))
    paths = plot_curves(res, ["car", "van", "bus"], tmp_path)
    cm = ConfusionMatrix(num_classes=3)
    cm.matrix[:] = rng.integers(0, 5, (4, 4))
    paths.append(plot_confusion_matrix(cm.normalized(), ["car", "van", "bus"], tmp_path / "confusion.png"))
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert matplotlib.get_backend() == backend

"""The combination rule on hand-worked numbers, and re-labelling detections with classifiers that know the answer."""

import numpy as np
import pytest
import torch
from painted_scene import painted_image
from torch import nn

from tphyolo.classify.classifier import CropClassifier, resolve_class_ids
from tphyolo.classify.combine import combine_class_scores, one_hot_scores
from tphyolo.classify.relabel import reclassify


def test_full_distribution_hand_worked():
    # a = obj * cls over 4 classes; S = {1, 2}; q = (0.2, 0.8); w = 0.5
    # p_S / sum = (0.6, 0.3) / 0.9 = (2/3, 1/3); mixed = 0.5 (2/3, 1/3) + 0.5 (0.2, 0.8) = (13/30, 17/30)
    # scaled back by the share 0.9: (0.39, 0.51); classes 0 and 3 unchanged
    a = torch.tensor([[0.1, 0.6, 0.3, 0.0]])
    out = combine_class_scores(a, torch.tensor([[0.2, 0.8]]), [1, 2], weight=0.5)
    torch.testing.assert_close(out, torch.tensor([[0.1, 0.39, 0.51, 0.0]]))
    assert out.argmax(1).item() == 2 and out.max().item() == pytest.approx(0.51)


def test_one_hot_hand_worked():
    # score 0.8 on class 1, S = {1, 2}, q = (0.1, 0.9)
    a = one_hot_scores(torch.tensor([0.8]), torch.tensor([1]), 4)
    torch.testing.assert_close(a, torch.tensor([[0.0, 0.8, 0.0, 0.0]]))
    q = torch.tensor([[0.1, 0.9]])
    # w = 0.7: mixed = 0.3 (1, 0) + 0.7 (0.1, 0.9) = (0.37, 0.63) -> x 0.8 = (0.296, 0.504): class 2 wins
    torch.testing.assert_close(combine_class_scores(a, q, [1, 2], weight=0.7), torch.tensor([[0, 0.296, 0.504, 0]]))
    # w = 0.4: mixed = 0.6 (1, 0) + 0.4 (0.1, 0.9) = (0.64, 0.36) -> (0.512, 0.288): the detector's label stays
    torch.testing.assert_close(combine_class_scores(a, q, [1, 2], weight=0.4), torch.tensor([[0, 0.512, 0.288, 0]]))


def test_weight_zero_is_the_identity_and_weight_one_is_the_classifier_within_the_share():
    a = torch.tensor([[0.05, 0.2, 0.3, 0.1], [0.0, 0.9, 0.0, 0.02]])
    q = torch.tensor([[0.7, 0.3], [0.25, 0.75]])
    torch.testing.assert_close(combine_class_scores(a, q, [1, 2], weight=0.0), a)
    out = combine_class_scores(a, q, [1, 2], weight=1.0)
    torch.testing.assert_close(out[:, 1:3], torch.tensor([[0.35, 0.15], [0.225, 0.675]]))
    torch.testing.assert_close(out[:, [0, 3]], a[:, [0, 3]])


def test_classifier_probabilities_are_renormalised_over_the_set():
    a = torch.tensor([[0.0, 0.5, 0.5]])
    # q sums to 0.4: (0.1, 0.3) -> mixed = 0.5 (0.5, 0.5) + 0.5 (0.1, 0.3) = (0.3, 0.4) -> / 0.7 -> x share 1.0
    out = combine_class_scores(a, torch.tensor([[0.1, 0.3]]), [1, 2], weight=0.5)
    torch.testing.assert_close(out, torch.tensor([[0.0, 3 / 7, 4 / 7]]))


def test_a_class_outside_the_set_can_win_after_the_set_is_split():
    # S holds 0.5 of the mass, 0.45 + 0.05; the classifier is undecided (0.5, 0.5) and alone (w = 1):
    # S's classes get 0.25 each, so class 0 (0.4, unchanged) becomes the argmax
    a = torch.tensor([[0.4, 0.45, 0.05]])
    out = combine_class_scores(a, torch.tensor([[0.5, 0.5]]), [1, 2], weight=1.0)
    torch.testing.assert_close(out, torch.tensor([[0.4, 0.25, 0.25]]))
    assert out.argmax(1).item() == 0


def test_rule_is_homogeneous_so_objectness_scales_through():
    torch.manual_seed(0)
    cls, obj = torch.rand(6, 5), torch.rand(6, 1)
    q = torch.rand(6, 3).softmax(1)
    lhs = combine_class_scores(cls * obj, q, [4, 0, 2], weight=0.6)
    rhs = combine_class_scores(cls, q, [4, 0, 2], weight=0.6) * obj
    torch.testing.assert_close(lhs, rhs)


def test_bad_inputs_are_refused():
    a = torch.rand(2, 3)
    with pytest.raises(ValueError, match="weight"):
        combine_class_scores(a, torch.rand(2, 2), [0, 1], weight=1.5)
    with pytest.raises(ValueError, match="do not match"):
        combine_class_scores(a, torch.rand(3, 2), [0, 1], weight=0.5)
    with pytest.raises(ValueError, match=r"\['van'\] are not among"):
        resolve_class_ids(["car", "van"], ["pedestrian", "car", "truck"])
    assert resolve_class_ids(["truck", "car"], ["pedestrian", "car", "truck"]) == (2, 1)


class FixedLogits(nn.Module):
    """A test double: the same logits for every crop; records the batch sizes it saw."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.tensor(logits, dtype=torch.float32)
        self.batches = []

    def forward(self, x):
        self.batches.append(x.shape[0])
        return self.logits.expand(x.shape[0], -1)


class ColourOracle(nn.Module):
    """Knows the answer from the crop's centre: logit 0 = redness, logit 1 = greenness (RGB input)."""

    def forward(self, x):
        n, _, h, w = x.shape
        centre = x[:, :, h // 4 : 3 * h // 4, w // 4 : 3 * w // 4].mean((2, 3))  # (N, 3) RGB
        return 20 * torch.stack([centre[:, 0] - centre[:, 1], centre[:, 1] - centre[:, 0]], 1)


def _detections():
    # six detections on the painted scene; the classifier covers classes 4 and 5 of a 6-class detector
    boxes = torch.tensor(
        [[40, 30, 80, 70], [170, 110, 200, 150], [40, 30, 80, 70], [0, 0, 20, 20], [170, 110, 200, 150], [5, 5, 9, 9]],
        dtype=torch.float32,
    )
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    labels = torch.tensor([4, 5, 0, 5, 1, 4])
    return boxes, scores, labels


def test_a_classifier_forced_to_one_class_relabels_exactly_the_boxes_of_its_set():
    image, _ = painted_image()
    boxes, scores, labels = _detections()
    net = FixedLogits([-20.0, 20.0])  # always class 5 (index 1 of the set)
    classifier = CropClassifier(net, names=["van", "car"], class_ids=[4, 5], img=16, context=0.1, weight=0.7)
    new_boxes, new_scores, new_labels = reclassify(image, boxes, scores, labels, classifier)
    assert net.batches == [4]  # the four detections of the set, classified together
    # q = (0, 1): label 4 -> mixed 0.3 (1, 0) + 0.7 (0, 1) = (0.3, 0.7) -> class 5, score x 0.7
    # label 5 -> (0.3 + 0.7) on class 5: unchanged; labels 0 and 1: untouched
    expected = {  # box index -> (score, label)
        0: (0.9 * 0.7, 5),
        1: (0.8, 5),
        2: (0.7, 0),
        3: (0.6, 5),
        4: (0.5, 1),
        5: (0.4 * 0.7, 5),
    }
    order = sorted(expected, key=lambda i: -expected[i][0])
    torch.testing.assert_close(new_boxes, boxes[order])
    torch.testing.assert_close(new_scores, torch.tensor([expected[i][0] for i in order]))
    assert new_labels.tolist() == [expected[i][1] for i in order]
    assert (new_scores[:-1] >= new_scores[1:]).all()


def test_detections_below_min_score_are_left_alone():
    image, _ = painted_image()
    boxes, scores, labels = _detections()
    net = FixedLogits([-20.0, 20.0])
    classifier = CropClassifier(net, names=["van", "car"], class_ids=[4, 5], img=16, context=0.1, weight=0.7)
    _, new_scores, new_labels = reclassify(image, boxes, scores, labels, classifier, min_score=0.55)
    assert net.batches == [3]  # 0.9 (label 4), 0.8 and 0.6 (label 5); 0.4 (label 4) is below
    assert new_labels.tolist() == [5, 0, 5, 5, 1, 4]
    torch.testing.assert_close(new_scores, torch.tensor([0.8, 0.7, 0.9 * 0.7, 0.6, 0.5, 0.4]))


def test_below_half_weight_a_one_hot_detection_keeps_its_label():
    image, _ = painted_image()
    boxes, scores, labels = _detections()
    classifier = CropClassifier(FixedLogits([-20.0, 20.0]), names=["van", "car"], class_ids=[4, 5], img=16, context=0)
    _, _, new_labels = reclassify(image, boxes, scores, labels, classifier, weight=0.45)
    assert sorted(new_labels.tolist()) == sorted(labels.tolist())


def test_an_oracle_classifier_reads_the_right_pixels():
    image, _ = painted_image()
    boxes = torch.tensor([[170, 110, 200, 150], [40, 30, 80, 70]], dtype=torch.float32)  # green, red
    scores, labels = torch.tensor([0.9, 0.8]), torch.tensor([8, 7])  # both labelled wrongly
    classifier = CropClassifier(ColourOracle(), names=["red", "green"], class_ids=[8, 7], img=24, context=0.2)
    probabilities = classifier.classify(image, boxes)
    assert probabilities.argmax(1).tolist() == [1, 0] and (probabilities.max(1).values > 0.99).all()
    _, new_scores, new_labels = reclassify(image, boxes, scores, labels, classifier, weight=1.0)
    assert new_labels.tolist() == [7, 8]  # green -> class 7, red -> class 8
    torch.testing.assert_close(new_scores, torch.tensor([0.9, 0.8]), atol=1e-4, rtol=0)


def test_full_class_scores_are_used_when_given():
    image, _ = painted_image()
    boxes = torch.tensor([[40, 30, 80, 70]], dtype=torch.float32)
    class_scores = torch.tensor([[0.05, 0.40, 0.35]])  # detector: class 1 by a hair over class 2
    scores, labels = torch.tensor([0.40]), torch.tensor([1])
    classifier = CropClassifier(FixedLogits([0.0, np.log(3.0)]), names=["a", "b"], class_ids=[1, 2], img=16,
                                context=0.0, weight=0.5)  # fmt: skip
    # q = (0.25, 0.75); p_S / sum = (0.4, 0.35) / 0.75; mixed = 0.5 (8/15, 7/15) + 0.5 (1/4, 3/4) = (47/120, 73/120)
    _, new_scores, new_labels = reclassify(image, boxes, scores, labels, classifier, class_scores=class_scores)
    assert new_labels.tolist() == [2]
    torch.testing.assert_close(new_scores, torch.tensor([0.75 * 73 / 120]))
    with pytest.raises(ValueError, match="class_scores"):
        reclassify(image, boxes, scores, labels, classifier, class_scores=class_scores[:, :2])


def test_nothing_of_the_set_means_nothing_changes():
    image, _ = painted_image()
    net = FixedLogits([5.0, -5.0])
    classifier = CropClassifier(net, names=["a", "b"], class_ids=[1, 2], img=16, context=0.1)
    boxes, scores, labels = torch.zeros((2, 4)), torch.tensor([0.5, 0.4]), torch.tensor([0, 3])
    out = reclassify(image, boxes, scores, labels, classifier)
    assert out[0] is boxes and out[1] is scores and out[2] is labels and net.batches == []


def test_crops_run_in_batches_of_the_classifier_batch_size():
    image, _ = painted_image()
    net = FixedLogits([1.0, 0.0])
    classifier = CropClassifier(net, names=["a", "b"], class_ids=[0, 1], img=8, context=0.0, batch_size=4)
    boxes = torch.tensor([[40.0, 30, 80, 70]]).repeat(10, 1)
    reclassify(image, boxes, torch.full((10,), 0.5), torch.zeros(10, dtype=torch.long), classifier)
    assert net.batches == [4, 4, 2]

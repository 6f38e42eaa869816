"""AP50 by object size: each bin scores its own objects, and a detection of an object of another bin is neither
a hit nor a false positive in it."""

import pytest
import torch

from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.size_bins import SIZE_BINS, size_bin_ap50

# one object per bin: 10 px, 20 px and 50 px squares of class 0
OBJECTS = torch.tensor([[5.0, 5, 15, 15], [40, 40, 60, 60], [100, 100, 150, 150]])


def image(detections: list[list[float]], boxes: torch.Tensor = OBJECTS) -> ImageResult:
    return ImageResult("a.jpg", (200, 200), torch.tensor(detections).reshape(-1, 6), torch.zeros(len(boxes)).long(),
                       boxes, torch.zeros(0, 4))  # fmt: skip


def test_each_size_bin_scores_its_own_objects():
    # The large object's detection scores highest: counted as a false positive in the other bins (as scoring
    # only the bin's objects would), it would pull their AP50 below 1.
    found_all = image([[100, 100, 150, 150, 0.95, 0], [40, 40, 60, 60, 0.9, 0], [5, 5, 15, 15, 0.8, 0]])
    missed_tiny = image([[100, 100, 150, 150, 0.95, 0], [40, 40, 60, 60, 0.9, 0]])
    assert list(size_bin_ap50([found_all], nc=1)) == list(SIZE_BINS) == ["<16px", "16-32px", ">32px"]
    assert size_bin_ap50([found_all], nc=1) == pytest.approx({"<16px": 1.0, "16-32px": 1.0, ">32px": 1.0}, abs=0.01)
    assert size_bin_ap50([missed_tiny], nc=1) == pytest.approx({"<16px": 0.0, "16-32px": 1.0, ">32px": 1.0}, abs=0.01)


def test_a_stray_detection_counts_in_the_bin_of_its_own_size_and_an_empty_bin_has_no_ap():
    stray = [[170, 170, 178, 178, 0.99, 0]]  # 8 px, on no object: a false positive of the smallest bin only
    scores = size_bin_ap50([image([*stray, [5, 5, 15, 15, 0.8, 0], [40, 40, 60, 60, 0.9, 0]], OBJECTS[:2])], nc=1)
    assert scores["<16px"] < 0.9 and scores["16-32px"] == pytest.approx(1.0, abs=0.01) and scores[">32px"] is None

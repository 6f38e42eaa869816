"""Profiler labels and grouping of a DetectionModel's layers."""

import torch

from tphyolo.bench.profile import LabelTime, ModuleLabels, layer_labels, layer_strides, summarize
from tphyolo.models.build import build_model


def test_labels_leave_model_unchanged_and_remove_hooks():
    torch.manual_seed(0)
    model = build_model("tph-yolov5n", num_classes=2).eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        before = model(x)
        with ModuleLabels(model) as labels:
            during = model(x)
        after = model(x)
    assert torch.equal(before, during) and torch.equal(before, after)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert "head:level0/s4" in labels.labels.values()


def test_summarize_groups_types_and_branches():
    model = build_model("tph-yolov5n", num_classes=2)
    strides = layer_strides(model, 64, device=torch.device("cpu"))
    labels = layer_labels(model)
    times = {label: LabelTime(label, 1, 1.0, 0.0) for label in labels.values()}
    rows = {name: cpu for name, cpu, _ in summarize(times, strides)}
    n_c3tr = sum(type(m).__name__ == "C3TR" for m in model.model)
    n_cbam = sum(type(m).__name__ == "CBAM" for m in model.model)
    assert rows["type C3TR"] == n_c3tr
    assert rows["branch TPH attention"] == n_c3tr + n_cbam
    deepest = max(strides.values())
    backbone_end = min(i for i, s in strides.items() if s == deepest)
    p2_layers = sum(1 for i, s in strides.items() if i > backbone_end and s == 4)
    assert p2_layers > 0 and rows["branch P2 (neck + head)"] == p2_layers + 1

import pytest
import torch

from tphyolo.ops import cxcywh_to_xyxy, non_max_suppression


def _iou(a: list[float], b: list[float]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _reference(pred, conf_thres, iou_thres, classes, agnostic, multi_label, max_det):
    """Brute force: every candidate, every class, greedy suppression in descending confidence."""
    out = []
    nc = pred.shape[2] - 5
    for x in pred.tolist():
        cands = []
        for row in x:
            if row[4] <= conf_thres:
                continue
            box = cxcywh_to_xyxy(torch.tensor(row[:4])).tolist()
            scores = [row[4] * s for s in row[5:]]
            if multi_label and nc > 1:
                picks = [(s, j) for j, s in enumerate(scores) if s > conf_thres]
            else:
                best = max(range(nc), key=lambda j: (scores[j], -j))
                picks = [(scores[best], best)] if scores[best] > conf_thres else []
            for s, j in picks:
                if classes is None or j in classes:
                    cands.append((s, j, box))
        cands.sort(key=lambda c: -c[0])
        kept = []
        for s, j, box in cands:
            if all((not agnostic and kj != j) or _iou(box, kb) <= iou_thres for _, kj, kb in kept):
                kept.append((s, j, box))
        out.append([[*b, s, j] for s, j, b in kept[:max_det]])
    return out


@pytest.mark.parametrize(
    ("multi_label", "agnostic", "classes", "max_det"),
    [(False, False, None, 500), (True, False, None, 500), (False, True, None, 500), (True, False, [0, 2], 7)],
)
def test_nms_matches_brute_force(multi_label, agnostic, classes, max_det):
    g = torch.Generator().manual_seed(0)
    b, n, nc = 3, 120, 4
    xy = torch.rand(b, n, 2, generator=g) * 100
    wh = torch.rand(b, n, 2, generator=g) * 30 + 2
    scores = torch.rand(b, n, 1 + nc, generator=g)
    pred = torch.cat((xy, wh, scores), dim=2)
    pred[2, :, 4] = 0.01  # an image with no candidate
    got = non_max_suppression(
        pred,
        conf_thres=0.2,
        iou_thres=0.45,
        classes=classes,
        agnostic=agnostic,
        multi_label=multi_label,
        max_det=max_det,
    )
    want = _reference(pred, 0.2, 0.45, classes, agnostic, multi_label, max_det)
    assert len(got) == b
    for g_img, w_img in zip(got, want, strict=True):
        assert g_img.shape == (len(w_img), 6)
        if w_img:
            torch.testing.assert_close(g_img, torch.tensor(w_img), rtol=0, atol=1e-4)
    assert got[2].shape == (0, 6)


def test_nms_rejects_bad_thresholds():
    with pytest.raises(ValueError, match="iou_thres"):
        non_max_suppression(torch.zeros(1, 2, 7), iou_thres=1.5)

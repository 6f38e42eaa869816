"""Cross-layer local attention against a cell-by-cell reference, and the CLLADetect head contract."""

from __future__ import annotations

import math

import pytest
import torch

from tphyolo.models.clla import CLLA, CLLADetect
from tphyolo.models.registry import resolve_layer


def reference_clla(layer: CLLA, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """One coarse cell at a time: its r x r fine cells from (2y - p, 2x - p) (zeros outside x1), scores
    q . k / r, weights softmax(2 * mean(scores) - scores), output (x2 + weighted sum of v) / 2."""
    n, c, h, w = x2.shape
    r = layer.size
    p = r // 2 - 1
    out = torch.empty_like(x2)
    for b in range(n):
        for y in range(h):
            for x in range(w):
                cells = []
                for i in range(r):
                    for j in range(r):
                        fy, fx = 2 * y + i - p, 2 * x + j - p
                        inside = 0 <= fy < x1.shape[2] and 0 <= fx < x1.shape[3]
                        cells.append(x1[b, :, fy, fx] if inside else torch.zeros(c))
                cells = torch.stack(cells)  # (r*r, C)
                q = layer.q(x2[b, :, y, x])
                k, v = layer.k(cells), layer.v(cells)
                scores = torch.stack([(q * kk).sum() / r for kk in k])
                weights = torch.softmax(2 * scores.mean() - scores, dim=0)
                out[b, :, y, x] = ((weights[:, None] * v).sum(0) + x2[b, :, y, x]) / 2
    return out


@pytest.mark.parametrize(("size", "coarse", "fine"), [(2, (4, 5), (8, 10)), (2, (3, 3), (7, 9)), (4, (3, 4), (6, 8))])
def test_clla_matches_cell_by_cell_reference(size: int, coarse: tuple[int, int], fine: tuple[int, int]) -> None:
    torch.manual_seed(0)
    layer = CLLA(size, 16)
    x1, x2 = torch.randn(2, 16, *fine), torch.randn(2, 16, *coarse)
    with torch.no_grad():
        torch.testing.assert_close(layer(x1, x2), reference_clla(layer, x1, x2), rtol=1e-5, atol=1e-5)


def test_clla_rejects_a_fine_map_that_is_too_small() -> None:
    with pytest.raises(ValueError, match="too small"):
        CLLA(2, 8)(torch.randn(1, 8, 7, 8), torch.randn(1, 8, 4, 4))


def test_clla_autocast_bf16() -> None:
    layer = CLLA(2, 16)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(torch.randn(1, 16, 8, 8), torch.randn(1, 16, 4, 4))
    assert out.shape == (1, 16, 4, 4)
    assert torch.isfinite(out).all()


def make_head() -> CLLADetect:
    anchors = [[4, 6, 8, 14, 14, 10], [16, 30, 30, 22, 28, 56], [60, 44, 80, 110, 160, 130]]
    return CLLADetect(10, anchors, [16, 32, 64, 128])


def test_head_levels_shapes_and_output_convs() -> None:
    head = make_head()
    assert CLLADetect.num_levels(4) == 3 and head.nl == 3 and head.na == 3
    assert head.output_convs() == [head.det.det, *head.m]
    xs = [torch.randn(2, 16, 32, 40), torch.randn(2, 32, 16, 20), torch.randn(2, 64, 8, 10), torch.randn(2, 128, 4, 5)]
    head.train()
    raw = head(xs)
    assert [tuple(p.shape) for p in raw] == [(2, 3, 16, 20, 15), (2, 3, 8, 10, 15), (2, 3, 4, 5, 15)]
    with pytest.raises(ValueError, match="expected 4 input maps"):
        head(xs[1:])


def test_head_bias_priors_use_each_level_stride() -> None:
    head = make_head()
    head.set_stride_(torch.tensor([8.0, 16.0, 32.0]))
    before = [conv.bias.detach().clone().view(3, 15) for conv in head.output_convs()]
    head.initialize_biases()
    for conv, old, s in zip(head.output_convs(), before, (8, 16, 32), strict=True):
        added = conv.bias.detach().view(3, 15) - old
        torch.testing.assert_close(added[:, 4], torch.full((3,), math.log(8 / (640 / s) ** 2)))
        torch.testing.assert_close(added[:, 5:], torch.full((3, 10), math.log(0.6 / (10 - 0.999999))))


def test_registry_entries() -> None:
    assert resolve_layer("CLLADetect").builder is CLLADetect
    assert resolve_layer("CLLADetect").role == "detect"
    assert resolve_layer("C3STR").role == resolve_layer("C3STRStandard").role == "csp"
    assert resolve_layer("C3STRStandard").builder(128, 128, 2).m.tr[1].shift_mask == "standard"

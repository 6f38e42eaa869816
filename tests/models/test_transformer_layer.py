"""C3TR's TransformerLayer drops out before its MLP's ReLU, which then works in place (less memory in training):
the same numbers as the layer's formula with the dropout after the ReLU, in training and in eval."""

import torch
import torch.nn.functional as F

from tphyolo.models.attention import TransformerLayer


def formula(layer: TransformerLayer, x: torch.Tensor) -> torch.Tensor:
    """x + drop(MHSA(LN1(x))), then x + drop(fc2(drop(relu(fc1(LN2(x)))))), with `layer`'s modules."""
    n, l, c = x.shape
    qkv = layer.qkv(layer.ln1(x)).view(n, l, 3, layer.num_heads, c // layer.num_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n, l, c)
    x = x + layer.dropout(layer.out_proj(attn))
    y = layer.fc2(layer.dropout(torch.relu(layer.fc1(layer.ln2(x)))))
    return x + layer.dropout(y)


def test_the_layer_computes_its_formula_bit_for_bit_with_the_same_dropout_masks():
    torch.manual_seed(0)
    layer = TransformerLayer(64, 4).train()
    x = torch.randn(2, 50, 64)
    results = []
    for compute in (layer, lambda t: formula(layer, t)):
        leaf = x.clone().requires_grad_(True)
        torch.manual_seed(1)  # the same draws: the same masks
        out = compute(leaf)
        out.square().sum().backward()
        results.append((out.detach(), leaf.grad))
    (ours, our_grad), (expected, expected_grad) = results
    assert torch.equal(ours, expected) and torch.equal(our_grad, expected_grad)
    assert (ours - layer(x)).abs().max() > 1e-3  # another draw differs: dropout is on
    layer.eval()
    with torch.no_grad():
        assert torch.equal(layer(x), formula(layer, x))

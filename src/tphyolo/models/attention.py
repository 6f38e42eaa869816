"""C3TR: the C3 block with a transformer encoder in place of its bottlenecks (TPH-YOLOv5's "TPH" block).

The original layer projects tokens with three bias-free Linear maps q, k, v and then again with
nn.MultiheadAttention's input projection. Both are linear, so each pair folds into one map; here a single
fused `qkv` Linear (C -> 3C, bias = the attention's input-projection bias) feeds
`F.scaled_dot_product_attention` on batch-first tokens. `tphyolo.models.convert` does the folding for
original weights (`TransformerLayer.from_original_state`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.blocks import C3, Conv

ORIGINAL_DROPOUT = 0.1  # residual-branch dropout of the original layer (its attention-weight dropout is 0)


class TransformerLayer(nn.Module):
    """Pre-norm encoder layer on (B, L, C) tokens:
    x + drop(MHSA(LN1(x))), then x + drop(fc2(drop(relu(fc1(LN2(x)))))), fc1/fc2 without bias (4C hidden).

    The MLP's dropout runs before its ReLU, which then works in place: dropout zeroes and scales by a positive
    factor, so relu(drop(h)) is drop(relu(h)) bit for bit (the same mask from the same random draws), and in
    training the (B, L, 4C) activations are kept once for backward instead of twice (the ReLU's output and the
    dropout's): 3 x 36 MiB less for the l-width C3TR at 48 x 48 tokens, batch 2."""

    def __init__(self, c: int, num_heads: int, dropout: float = ORIGINAL_DROPOUT) -> None:
        super().__init__()
        if c % num_heads:
            raise InputError(f"TransformerLayer: {c} channels do not split into {num_heads} heads")
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.out_proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc1 = nn.Linear(c, 4 * c, bias=False)
        self.fc2 = nn.Linear(4 * c, c, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.act = nn.ReLU(inplace=True)  # on the dropout's fresh output (see the class docstring)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, l, c = x.shape
        qkv = self.qkv(self.ln1(x)).view(n, l, 3, self.num_heads, c // self.num_heads)  # (B, L, 3, nh, hs)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, nh, L, hs) each
        attn = F.scaled_dot_product_attention(q, k, v)  # (B, nh, L, hs)
        attn = attn.transpose(1, 2).reshape(n, l, c)  # (B, L, C)
        x = x + self.dropout(self.out_proj(attn))
        y = self.fc2(self.act(self.dropout(self.fc1(self.ln2(x)))))  # (B, L, C)
        return x + self.dropout(y)

    @staticmethod
    def from_original_state(state: dict[str, torch.Tensor], prefix: str) -> None:
        """Rewrites one original layer's keys under `prefix` in place: q/k/v + ma.in_proj -> qkv,
        ma.out_proj -> out_proj. Folded weights are computed in float64 and stored as at least float32.
        Leaves `state` alone unless all original attention keys are there (the converter then reports
        whatever is missing)."""
        names = ("q.weight", "k.weight", "v.weight", "ma.in_proj_weight", "ma.in_proj_bias")
        names += ("ma.out_proj.weight", "ma.out_proj.bias")
        if not all(prefix + name in state for name in names):
            return
        w_q, w_k, w_v, w_in, b_in, w_out, b_out = (state.pop(prefix + name) for name in names)
        dtype = torch.promote_types(w_in.dtype, torch.float32)
        c = w_q.shape[0]
        folded = [w_in[j * c : (j + 1) * c].double() @ w.double() for j, w in enumerate((w_q, w_k, w_v))]
        state[prefix + "qkv.weight"] = torch.cat(folded, dim=0).to(dtype)  # (3C, C)
        state[prefix + "qkv.bias"] = b_in.to(dtype)  # (3C,)
        state[prefix + "out_proj.weight"] = w_out
        state[prefix + "out_proj.bias"] = b_out


class TransformerBlock(nn.Module):
    """(B, C_in, H, W) -> (B, C_out, H, W): optional 1x1 Conv, tokens + learned linear position embedding,
    then `num_layers` TransformerLayers over the H*W tokens."""

    def __init__(self, c_in: int, c_out: int, num_heads: int, num_layers: int) -> None:
        super().__init__()
        self.conv = Conv(c_in, c_out) if c_in != c_out else None
        self.linear = nn.Linear(c_out, c_out)  # learned position embedding
        self.tr = nn.Sequential(*(TransformerLayer(c_out, num_heads) for _ in range(num_layers)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.conv is not None:
            x = self.conv(x)
        n, c, h, w = x.shape
        tokens = x.flatten(2).transpose(1, 2)  # (B, HW, C)
        tokens = self.tr(tokens + self.linear(tokens))  # (B, HW, C)
        return tokens.transpose(1, 2).reshape(n, c, h, w)


class C3TR(C3):
    """C3 whose inner block is a TransformerBlock with 4 heads and `n` layers on the hidden channels."""

    def __init__(self, c_in: int, c_out: int, n: int = 1, shortcut: bool = True, g: int = 1, e: float = 0.5) -> None:
        super().__init__(c_in, c_out, n, shortcut, g, e)
        c_hidden = int(c_out * e)
        self.m = TransformerBlock(c_hidden, c_hidden, num_heads=4, num_layers=n)

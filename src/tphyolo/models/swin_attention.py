"""Window attention of the Swin layers: multi-head self-attention within windows of N = M * M tokens, with
a learned relative-position bias (table indexed as in the released weights, see `tphyolo.models.swin`) and,
for shifted windows, an additive shift mask.

Two entry points compute the same thing: `WindowAttention.forward` on (B, nW, N, C) windows (the formulation
torch.compile traces), and `WindowAttention.attend` on window-major rows prepared by a `WindowPlan`, with the
windows that need no shift mask first, so that q, k and v stay views of the qkv projection and each group of
windows is one attention call. The attention kernel is SDPA (flash or memory-efficient where available),
except on the CPU when the bias needs a gradient: no CPU kernel takes one, and SDPA's math fallback copies
and checks more than the explicit softmax(q k^T / sqrt(hs) + bias) v used there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.swin_windows import relative_position_index


def attention_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype that Linear layers produce from `x`: the autocast dtype inside autocast, else x's."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


class WindowAttention(nn.Module):
    """Multi-head self-attention within windows, with a learned relative-position bias.

    forward: x (B, nW, N, C) tokens of nW windows of N = M*M tokens; `shift_mask` (nW, 1, N, N) additive or
    None -> (B, nW, N, C). `attend` is the same computation on window-major rows without the output
    projection (what `SwinLayer` runs outside torch.compile). Parameter names match the released layer
    (qkv, proj, relative_position_bias_table).
    """

    def __init__(
        self,
        c: int,
        window: int,
        num_heads: int,
        *,
        qkv_bias: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
    ) -> None:
        super().__init__()
        if num_heads < 1 or c % num_heads:
            raise InputError(f"WindowAttention: {c} channels do not split into {num_heads} heads")
        self.num_heads = num_heads
        self.attn_drop = attn_drop
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, num_heads))
        self.register_buffer("relative_position_index", relative_position_index(window), persistent=False)
        self.qkv = nn.Linear(c, 3 * c, bias=qkv_bias)
        self.proj = nn.Linear(c, c)
        self.proj_drop = nn.Dropout(proj_drop)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def position_bias(self) -> torch.Tensor:
        """(nH, N, N) relative-position bias, float32 (the table's dtype)."""
        n_tok = self.relative_position_index.shape[0]
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]  # (N*N, nH)
        return bias.view(n_tok, n_tok, self.num_heads).permute(2, 0, 1)

    def forward(self, x: torch.Tensor, shift_mask: torch.Tensor | None = None) -> torch.Tensor:
        n, nw, t, c = x.shape
        nh = self.num_heads
        qkv = self.qkv(x).view(n, nw, t, 3, nh, c // nh)  # (B, nW, N, 3, nH, hs)
        q, k, v = qkv.permute(3, 0, 1, 4, 2, 5).unbind(0)  # (B, nW, nH, N, hs) each
        bias = self.position_bias().to(q.dtype)  # (nH, N, N)
        if shift_mask is None:  # one bias for all windows: windows fold into the batch
            shape, attn_mask = (n * nw, nh, t, -1), bias.unsqueeze(0)  # (1, nH, N, N)
        else:  # a bias per (window, head), shared over the batch
            shift_mask = shift_mask.to(q.dtype)  # no-op when built in the attention dtype
            shape, attn_mask = (n, nw * nh, t, -1), (bias + shift_mask).reshape(1, nw * nh, t, t)
        out = F.scaled_dot_product_attention(
            q.reshape(shape),
            k.reshape(shape),
            v.reshape(shape),
            attn_mask=attn_mask,
            dropout_p=self.attn_drop if self.training else 0.0,
        )
        out = out.view(n, nw, nh, t, c // nh).transpose(2, 3).reshape(n, nw, t, c)  # (B, nW, N, C)
        return self.proj_drop(self.proj(out))

    def attend(self, rows: torch.Tensor, tokens: int, plain: int, biases: WindowBiases) -> torch.Tensor:
        """Attention of window-major rows (nW' * N, C) (windows of N = `tokens` rows, the first `plain` of
        them with the bias `biases.plain`, the rest with `biases.masked`) -> (nW' * N, C), before `proj`.
        q, k and v stay views of one qkv projection; each group of windows is one attention call."""
        c = rows.shape[1]
        nh = self.num_heads
        qkv = self.qkv(rows).view(-1, tokens, 3, nh, c // nh).permute(2, 0, 3, 1, 4)  # (3, nW', nH, N, hs)
        if _needs_explicit(biases.plain):
            qkv = qkv.contiguous()  # one copy, then every product below is a batched matmul of views
        drop = self.attn_drop if self.training else 0.0
        groups = zip((plain, qkv.shape[1] - plain), (biases.plain, biases.masked), strict=True)
        sizes, group_biases = zip(*((n, b) for n, b in groups if n), strict=True)  # the non-empty groups
        groups = qkv.split(sizes, dim=1) if len(sizes) > 1 else (qkv,)  # no split (and no gradient cat) for one
        outs = []
        for group, bias in zip(groups, group_biases, strict=True):
            q, k, v = group.unbind(0)  # (nW'', nH, N, hs) each
            outs.append(_attention(q, k, v, bias, drop).transpose(1, 2))  # (nW'', N, nH, hs)
        out = outs[0] if len(outs) == 1 else torch.cat(outs)
        return out.reshape(-1, c)  # a view when the kernel wrote (nW', N, nH, hs) memory


def _needs_explicit(bias: torch.Tensor) -> bool:
    """Whether `_attention` computes explicitly: a bias that needs a gradient, on the CPU, where no fused
    SDPA kernel takes one (SDPA would take its math path, with extra copies and checks)."""
    return bias.requires_grad and bias.device.type == "cpu"


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, drop: float) -> torch.Tensor:
    """softmax(q k^T / sqrt(hs) + bias) v for q, k, v (n, nH, N, hs) and an additive bias broadcastable to
    (n, nH, N, N); SDPA unless `_needs_explicit(bias)`."""
    if not _needs_explicit(bias):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=drop)
    logits = torch.add(bias, q @ k.transpose(-2, -1), alpha=q.shape[-1] ** -0.5)  # (n, nH, N, N), one pass
    weights = F.dropout(logits.softmax(dim=-1), drop) if drop else logits.softmax(dim=-1)
    return weights @ v  # (n, nH, N, hs)


@dataclass(frozen=True)
class WindowBiases:
    """The additive attention biases of one layer call: `plain` (1, nH, N, N), the relative-position bias of
    windows without a shift mask; `masked` (nW_m * B, nH, N, N), bias plus shift mask of the masked windows
    of a `WindowPlan`, repeated per image, or None when there are none."""

    plain: torch.Tensor
    masked: torch.Tensor | None

"""Stride-1 max filters, the pooling of SPP and SPPF, computed the fastest exact way for the tensor's layout.

`max_filter(x, k)` equals `F.max_pool2d(x, k, stride=1, padding=k // 2)` bit for bit (odd k): out[..., i, j] is
the maximum of x over the k x k window centred on (i, j), clipped at the borders (pooling pads with -inf; NaN
propagates, as in pooling). Such filters compose and separate exactly, since a maximum rounds nothing:

- a filter of size a after one of size b is the filter of size a + b - 1 (`chain_steps`: SPP's 5, 9, 13 are three
  5 x 5 steps, each reusing the previous output);
- a k x k filter is a k x 1 filter after a 1 x k one.

Which form runs was chosen by timing each against the square pool, on an Intel Xeon (AVX-512) with one thread
(the 2-core machine was shared, load 17-20), on SPP's first map in tph-yolov5n at 320 px, (1, 32, 80, 80) and
(8, 32, 80, 80), three chained 5 x 5 filters (median of 9 interleaved calls), and on the whole fused
tph-yolov5n at 320 px, batch 1 (median of 11 interleaved passes):

- inference (autograd off), NCHW: shifted maxima along W, then H; 4.4-4.8x the pools, the whole model 1.65x
  (separable pools: 1.20x);
- inference, NHWC (channels_last): shifted maxima; the whole model 1.13x (separable pools: 0.96x);
- training, NHWC: the square pool (the separable pools measured 0.8-0.9x);
- training (autograd recording), NCHW: the square pool of a channels_last copy, copied back to NCHW. PyTorch's
  CPU pooling vectorises over channels only in channels_last, and its NCHW kernel is scalar: on an AMD EPYC
  (AVX-512, one thread, load 5-6), three chained 5 x 5 filters with their backward on (8, 32, 80, 80) took
  278 ms against 511 ms for the separable pools (the first form) and 572 ms for the NCHW square pool, and on
  (8, 64, 40, 40) 147 against 272 ms. Both copies are exact and the pooling is the square pool itself, so the
  output and the gradients are the NCHW square pool's bit for bit, ties included. SPP and SPPF go one step
  further (`pooling_source`): one channels_last copy of their pooled map feeds the whole chain, and their
  concatenation reads the channels_last outputs directly, which saves the copies back and their gradients'.

Tracing, ONNX export and torch.compile get the square pool, one MaxPool node for an exporter or compiler to map.
Inference computes no gradients; in training both layouts run the square pool, so the gradients are its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from tphyolo.errors import InputError


def chain_steps(sizes: Sequence[int]) -> list[int] | None:
    """Filter sizes s_1, s_2, ... such that applying them in turn yields each of `sizes` in order
    ((5, 9, 13) -> [5, 5, 5]; (3, 7, 11) -> [3, 5, 5]); None when `sizes` are not odd and strictly increasing."""
    sizes = list(sizes)
    if not sizes or any(size < 1 or size % 2 == 0 for size in sizes) or sizes != sorted(set(sizes)):
        return None
    return [b - a + 1 for a, b in zip([1, *sizes[:-1]], sizes, strict=True)]


def max_filter(x: torch.Tensor, size: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, C, H, W): `F.max_pool2d(x, size, 1, size // 2)` for an odd `size`, exactly."""
    if size % 2 == 0:
        raise InputError(f"max_filter: size must be odd to keep H and W, got {size}")
    if size == 1:
        return x
    if _exporting():
        return F.max_pool2d(x, size, stride=1, padding=size // 2)
    channels_last = x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)
    if torch.is_grad_enabled() and x.requires_grad:
        if channels_last:
            return F.max_pool2d(x, size, stride=1, padding=size // 2)
        return _square_pool_through_channels_last(x, size)
    return _shifted_maxima(_shifted_maxima(x, size, dim=-1), size, dim=-2)


def pooling_source(x: torch.Tensor) -> torch.Tensor:
    """What SPP and SPPF pool from, for `x` (B, C, H, W): in NCHW training (autograd recording), a channels_last
    copy, so that every filter of their chain runs the vectorised square pool with no copy back (their
    concatenation, led by the NCHW `x`, gathers the channels_last maps into NCHW); else `x` itself."""
    if _exporting() or not (torch.is_grad_enabled() and x.requires_grad) or x.dim() != 4:
        return x
    if x.is_contiguous(memory_format=torch.channels_last):
        return x
    return x.contiguous(memory_format=torch.channels_last)


def _exporting() -> bool:
    return torch.compiler.is_compiling() or torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()


def _square_pool_through_channels_last(x: torch.Tensor, size: int) -> torch.Tensor:
    """The square pool of an NCHW tensor, computed in channels_last (the vectorised kernel), returned as NCHW."""
    pooled = F.max_pool2d(x.contiguous(memory_format=torch.channels_last), size, stride=1, padding=size // 2)
    return pooled.contiguous()


def _shifted_maxima(x: torch.Tensor, size: int, *, dim: int) -> torch.Tensor:
    """The 1-D max filter of `size` along `dim`: each position takes in its neighbours up to size // 2 away on
    either side; positions near the border skip the neighbours that do not exist (the -inf padding)."""
    length = x.shape[dim]
    if length == 1:
        return x.clone()
    out = torch.empty_like(x)
    kept = length - 1
    torch.maximum(x.narrow(dim, 0, kept), x.narrow(dim, 1, kept), out=out.narrow(dim, 0, kept))  # x[i], x[i + 1]
    out.narrow(dim, kept, 1).copy_(x.narrow(dim, kept, 1))
    for offset in range(1, min(size // 2, kept) + 1):
        kept = length - offset
        left = out.narrow(dim, offset, kept)
        torch.maximum(left, x.narrow(dim, 0, kept), out=left)  # out[i] takes x[i - offset]
        if offset > 1:
            right = out.narrow(dim, 0, kept)
            torch.maximum(right, x.narrow(dim, offset, kept), out=right)  # out[i] takes x[i + offset]
    return out

"""Convolutional building blocks of the YOLOv5 family.

Every block keeps the parameter names of the YOLOv5 v6.0 layout (`conv`, `bn`, `cv1`, `cv2`, `cv3`, `m`), so
state dicts written by the original code load key for key. All blocks map (B, C_in, H, W) feature maps to
(B, C_out, H', W') feature maps.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.max_filter import chain_steps, max_filter, pooling_source

BN_EPS = 1e-3
BN_MOMENTUM = 0.03


def same_padding(kernel: int | Sequence[int], padding: int | Sequence[int] | None = None) -> int | list[int]:
    """Padding that keeps H and W for stride 1 (odd kernels); an explicit `padding` wins."""
    if padding is not None:
        return padding if isinstance(padding, int) else list(padding)
    return kernel // 2 if isinstance(kernel, int) else [k // 2 for k in kernel]


class Conv(nn.Module):
    """Conv2d (no bias) -> BatchNorm2d (eps 1e-3, momentum 0.03) -> SiLU.

    `act`: True for SiLU, False for none, or an activation module. `bn=False` builds the fused form: a biased
    convolution and `bn` None (what `fused()` returns).
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        k: int | tuple[int, int] = 1,
        s: int | tuple[int, int] = 1,
        p: int | Sequence[int] | None = None,
        g: int = 1,
        act: bool | nn.Module = True,
        *,
        bn: bool = True,
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, s, same_padding(k, p), groups=g, bias=not bn)
        self.bn = nn.BatchNorm2d(c_out, eps=BN_EPS, momentum=BN_MOMENTUM) if bn else None
        if act is True:
            self.act: nn.Module = nn.SiLU()
        elif isinstance(act, nn.Module):
            self.act = act
        else:
            self.act = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)  # (B, C_out, H / s, W / s)
        return self.act(y if self.bn is None else self.bn(y))

    @torch.no_grad()
    def fused(self) -> Conv:
        """A new Conv with the BatchNorm (running statistics) folded into its convolution; equal in eval."""
        if self.bn is None:
            raise InputError("Conv.fused(): this Conv has no BatchNorm to fold (already fused)")
        conv, bn = self.conv, self.bn
        out = Conv(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            conv.padding,
            conv.groups,
            act=copy.deepcopy(self.act),
            bn=False,
        ).to(device=conv.weight.device, dtype=conv.weight.dtype)
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)  # (C_out,)
        out.conv.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
        out.conv.bias.copy_(bn.bias - bn.running_mean * scale)
        return out


class Bottleneck(nn.Module):
    """1x1 Conv -> 3x3 Conv, plus the input when `shortcut` and C_in == C_out."""

    def __init__(self, c_in: int, c_out: int, shortcut: bool = True, g: int = 1, e: float = 0.5) -> None:
        super().__init__()
        c_hidden = int(c_out * e)
        self.cv1 = Conv(c_in, c_hidden, 1, 1)
        self.cv2 = Conv(c_hidden, c_out, 3, 1, g=g)
        self.add = shortcut and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cv2(self.cv1(x))  # (B, C_out, H, W)
        return x + y if self.add else y


class C3(nn.Module):
    """CSP bottleneck with three convolutions: cv3(cat(m(cv1(x)), cv2(x))).

    `n` is the number of inner blocks (the yaml's repeat count after depth scaling); subclasses replace `m`,
    which maps (B, C_hidden, H, W) to itself.
    """

    def __init__(self, c_in: int, c_out: int, n: int = 1, shortcut: bool = True, g: int = 1, e: float = 0.5) -> None:
        super().__init__()
        c_hidden = int(c_out * e)
        self.cv1 = Conv(c_in, c_hidden, 1, 1)
        self.cv2 = Conv(c_in, c_hidden, 1, 1)
        self.cv3 = Conv(2 * c_hidden, c_out, 1)
        self.m: nn.Module = nn.Sequential(*(Bottleneck(c_hidden, c_hidden, shortcut, g, e=1.0) for _ in range(n)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat((self.m(self.cv1(x)), self.cv2(x)), dim=1)  # (B, 2 * C_hidden, H, W)
        return self.cv3(y)  # (B, C_out, H, W)


class SPP(nn.Module):
    """Spatial pyramid pooling: max-pools of sizes `k` (stride 1) on a halved-channel map, concatenated.

    Growing odd sizes are computed as a chain of small filters, each reusing the previous output (a max filter of
    size a after one of size b is exactly one of size a + b - 1, also at the borders), so (5, 9, 13) runs as three
    5 x 5 filters; sizes that do not chain (even, or not increasing) are pooled one by one. Every size is pooled
    by `max_filter`, equal bit for bit to `nn.MaxPool2d(size, 1, size // 2)`; in NCHW training they pool a
    channels_last copy (`pooling_source`) and the concatenation returns to x's layout. `steps` holds the chain's
    filter sizes, None when the sizes do not chain; the layer has no parameters beyond its two Convs.
    """

    def __init__(self, c_in: int, c_out: int, k: Sequence[int] = (5, 9, 13)) -> None:
        super().__init__()
        c_hidden = c_in // 2
        self.cv1 = Conv(c_in, c_hidden, 1, 1)
        self.cv2 = Conv(c_hidden * (len(k) + 1), c_out, 1, 1)
        self.sizes = [int(size) for size in k]
        self.steps = chain_steps(self.sizes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.cv1(x)  # (B, C_in / 2, H, W)
        source = pooling_source(x)  # x, or its channels_last copy in NCHW training
        if self.steps is None:
            return self.cv2(torch.cat([x, *(_pooled(source, size) for size in self.sizes)], dim=1))
        pooled = [source]
        for step in self.steps:
            pooled.append(max_filter(pooled[-1], step))
        return self.cv2(torch.cat([x, *pooled[1:]], dim=1))  # (B, C_out, H, W), in x's layout


class SPPF(nn.Module):
    """Fast SPP: three chained max-pools of size k; SPPF(k=5) equals SPP(k=(5, 9, 13))."""

    def __init__(self, c_in: int, c_out: int, k: int = 5) -> None:
        super().__init__()
        c_hidden = c_in // 2
        self.cv1 = Conv(c_in, c_hidden, 1, 1)
        self.cv2 = Conv(c_hidden * 4, c_out, 1, 1)
        self.k = int(k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.cv1(x)  # (B, C_in / 2, H, W)
        y1 = _pooled(pooling_source(x), self.k)  # x's channels_last copy in NCHW training (see SPP)
        y2 = _pooled(y1, self.k)
        return self.cv2(torch.cat((x, y1, y2, _pooled(y2, self.k)), dim=1))  # (B, C_out, H, W)


def _pooled(x: torch.Tensor, size: int) -> torch.Tensor:
    """`nn.MaxPool2d(size, 1, size // 2)(x)`: by `max_filter` for odd sizes, directly for even ones."""
    if size % 2 == 1:
        return max_filter(x, size)
    return F.max_pool2d(x, size, stride=1, padding=size // 2)


class Focus(nn.Module):
    """Space-to-depth (B, C, H, W) -> (B, 4C, H/2, W/2), then a Conv."""

    def __init__(
        self,
        c_in: int,
        c_out: int,
        k: int = 1,
        s: int = 1,
        p: int | None = None,
        g: int = 1,
        act: bool | nn.Module = True,
    ) -> None:
        super().__init__()
        self.conv = Conv(c_in * 4, c_out, k, s, p, g, act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        patches = (x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2])
        return self.conv(torch.cat(patches, dim=1))  # (B, C_out, H / 2, W / 2)


class Concat(nn.Module):
    """Concatenates a list of tensors along `dimension` (channels by default)."""

    def __init__(self, dimension: int = 1) -> None:
        super().__init__()
        self.d = dimension

    def forward(self, xs: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(xs, self.d)

"""CBAM: channel attention then spatial attention (Woo et al., 2018), as used in TPH-YOLOv5's neck.

Parameter names follow the TPH-YOLOv5 layout: `channel_attention.shared_MLP.{0,2}` (Linear C -> C/16 -> C)
and `spatial_attention.conv2d` (7x7 conv, 2 -> 1 channels, with bias).
"""

from __future__ import annotations

import torch
from torch import nn

from tphyolo.errors import InputError


class ChannelAttention(nn.Module):
    """Per-channel gate in (0, 1): sigmoid(MLP(avg-pool(x)) + MLP(max-pool(x))), shape (B, C, 1, 1)."""

    def __init__(self, channels: int, reduction: int = 16) -> None:
        super().__init__()
        hidden = channels // reduction
        self.shared_MLP = nn.Sequential(nn.Linear(channels, hidden), nn.ReLU(), nn.Linear(hidden, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, _, _ = x.shape
        avg = self.shared_MLP(x.mean(dim=(2, 3)))  # (B, C)
        peak = self.shared_MLP(x.amax(dim=(2, 3)))  # (B, C)
        return torch.sigmoid(avg + peak).view(n, c, 1, 1)


class SpatialAttention(nn.Module):
    """Per-position gate in (0, 1): sigmoid(conv7x7([mean_c(x), max_c(x)])), shape (B, 1, H, W)."""

    def __init__(self, kernel_size: int = 7) -> None:
        super().__init__()
        self.conv2d = nn.Conv2d(2, 1, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.cat((x.mean(dim=1, keepdim=True), x.amax(dim=1, keepdim=True)), dim=1)  # (B, 2, H, W)
        return torch.sigmoid(self.conv2d(pooled))


class CBAM(nn.Module):
    """(B, C, H, W) -> (B, C, H, W). `c_out` exists for the yaml's argument layout and must equal `c_in`."""

    def __init__(self, c_in: int, c_out: int | None = None) -> None:
        super().__init__()
        if c_out is not None and c_out != c_in:
            raise InputError(f"CBAM keeps the channel count: c_in={c_in} but c_out={c_out}")
        self.channel_attention = ChannelAttention(c_in)
        self.spatial_attention = SpatialAttention()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.channel_attention(x) * x  # (B, C, H, W)
        return self.spatial_attention(x) * x  # (B, C, H, W)

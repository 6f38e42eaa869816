"""Anchor-based detection heads: the contract every head follows, and the YOLOv5 `Detect` head.

The contract (`DetectionHead`), which `DetectionModel` relies on and nothing else:

- constructor `Head(nc, anchors, ch)`: `nc` classes; `anchors` a list of `nl` flat lists
  `[w0, h0, w1, h1, ...]` in input pixels (the parser fills placeholders when the yaml gives only a count);
  `ch` the channel counts of the head's input maps, in the order of the yaml's `from` list.
  `num_levels(len(ch))` tells the parser how many output levels a head makes from that many inputs
  (`Detect`: one per input).
- attributes `nc`, `no = nc + 5` (outputs per anchor: x, y, w, h, objectness, classes), `nl` (output levels),
  `na` (anchors per level).
- buffer `anchors` (nl, na, 2): anchor (w, h) in grid units of its level (pixels / stride), as in the original
  state dict (`model.{i}.anchors`); buffer `stride` (nl,): input pixels per grid cell of each level, filled by
  `DetectionModel` at build time (not part of the state dict).
- `predict_levels(xs)` (the one method a head implements): input maps -> nl raw maps (B, na * no, H_l, W_l),
  levels ordered by increasing stride.
- `output_convs()`: the nl convolutions whose outputs are those raw maps (in level order); their biases are
  initialised by `initialize_biases` (objectness prior of 8 objects per 640x640 image, class prior 0.6 / nc).
- `forward(xs)`: train mode -> list of nl tensors (B, na, H_l, W_l, no), raw logits; eval mode -> (B, N, no)
  with N = sum(na * H_l * W_l): boxes decoded to (cx, cy, w, h) in input pixels, objectness and class scores
  after sigmoid, float32, levels in order, each level anchor-major then row-major (a, y, x). Unlike
  YOLOv5's `(decoded, raw)` tuple, eval returns only the decoded tensor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.capture import capturing

OBJECTS_PER_IMAGE_PRIOR = 8.0  # objectness prior: objects per 640 x 640 image
CLASS_PRIOR = 0.6


class DetectionHead(nn.Module):
    """Base class of anchor-based heads; see the module docstring for the contract."""

    def __init__(self, nc: int, anchors: Sequence[Sequence[float]]) -> None:
        super().__init__()
        if not anchors or any(len(level) % 2 or len(level) != len(anchors[0]) for level in anchors):
            raise InputError(f"anchors must be nl lists of equal, even length (w, h pairs); got {anchors!r}")
        self.nc = nc
        self.no = nc + 5
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        anchor_tensor = torch.tensor(anchors, dtype=torch.float32).view(self.nl, self.na, 2)
        self.register_buffer("anchors", anchor_tensor)  # (nl, na, 2) grid units once the model is built
        self.register_buffer("stride", torch.ones(self.nl), persistent=False)  # (nl,) pixels per cell
        self._grids: dict[tuple[int, int, int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def num_levels(cls, num_inputs: int) -> int:
        """Output levels made from `num_inputs` input maps."""
        return num_inputs

    def predict_levels(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Input maps -> nl raw maps (B, na * no, H_l, W_l)."""
        raise NotImplementedError(f"{type(self).__name__} must implement predict_levels")

    def output_convs(self) -> list[nn.Conv2d]:
        """The nl final convolutions, in level order."""
        raise NotImplementedError(f"{type(self).__name__} must implement output_convs")

    def forward(self, xs: list[torch.Tensor]) -> list[torch.Tensor] | torch.Tensor:
        raw = self.raw_maps(xs)
        return raw if self.training else self.decode(raw)

    def raw_maps(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Input maps -> nl raw maps (B, na, H_l, W_l, no), what the loss reads and `decode` decodes."""
        return [self.raw_map(p) for p in self.predict_levels(xs)]

    def raw_map(self, p: torch.Tensor) -> torch.Tensor:
        """One level's output-convolution map (B, na * no, H, W) -> its raw map (B, na, H, W, no), contiguous."""
        b, _, h, w = p.shape
        return p.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).contiguous()

    def decode(self, raw: list[torch.Tensor]) -> torch.Tensor:
        """Raw maps (B, na, H_l, W_l, no) -> (B, N, no) float32: xywh pixels, sigmoid objectness and classes.

        Decoding runs in float32 whatever the input dtype (bf16 cannot hold pixel coordinates exactly). Two
        formulations give the same bits: run eagerly without autograd, each level's sigmoid is written into its
        rows of one output tensor and the box columns are transformed there in place; under graph capture or
        when a gradient is needed, plain tensor operations and concatenations (what exporters and torch.compile
        take). The first writes the (B, N, no) result once, where the second writes it three times (sigmoid,
        each level's join, the join of the levels): 1.2-2x faster on the CPU, more where large fresh tensors
        are page-faulted in (glibc's default malloc thresholds).
        """
        if capturing() or (torch.is_grad_enabled() and any(p.requires_grad for p in raw)):
            return self._decode_functional(raw)
        b, no = raw[0].shape[0], self.no
        out = torch.empty(b, sum(p[0].numel() // no for p in raw), no, dtype=torch.float32, device=raw[0].device)
        start = 0
        for i, p in enumerate(raw):
            _, na, h, w, _ = p.shape
            grid, anchor_grid = self._grid(i, h, w, p.device)  # (1, 1, H, W, 2), (1, na, 1, 1, 2)
            y = out[:, start : start + na * h * w].view(b, na, h, w, no)  # this level's rows
            start += na * h * w
            torch.sigmoid(p.float(), out=y)
            y[..., 0:2].mul_(2).sub_(0.5).add_(grid).mul_(self.stride[i].float())  # xy pixels
            y[..., 2:4].mul_(2).pow_(2).mul_(anchor_grid)  # wh pixels
        return out

    def _decode_functional(self, raw: list[torch.Tensor]) -> torch.Tensor:
        """`decode` as plain tensor operations, without writing into views."""
        out = []
        for i, p in enumerate(raw):
            b, _, h, w, _ = p.shape
            grid, anchor_grid = self._grid(i, h, w, p.device)  # (1, 1, H, W, 2), (1, na, 1, 1, 2)
            y = p.float().sigmoid()
            xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.stride[i].float()  # (B, na, H, W, 2) pixels
            wh = (y[..., 2:4] * 2) ** 2 * anchor_grid  # (B, na, H, W, 2) pixels
            out.append(torch.cat((xy, wh, y[..., 4:]), dim=-1).view(b, -1, self.no))  # (B, na * H * W, no)
        return torch.cat(out, dim=1)

    def _grid(self, i: int, h: int, w: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Cell offsets (x, y), (1, 1, H, W, 2), and anchor sizes in pixels, (1, na, 1, 1, 2), for level i,
        float32, to be broadcast against the level's (B, na, H, W, 2) predictions.

        Cached per (level, size, device) in eager mode; under graph capture (torch.compile, export tracing)
        they are recomputed inside the graph, so the cache never causes a graph break or a constant size.
        """
        if capturing():
            return self._make_grid(i, h, w, device)
        key = (i, h, w, device)
        if key not in self._grids:
            self._grids[key] = self._make_grid(i, h, w, device)
        return self._grids[key]

    def _make_grid(self, i: int, h: int, w: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        # Shapes that broadcast, not an `expand` to the level's size: traced, such an expand becomes an Expand to
        # a shape computed from the input, which a runtime must re-derive for every batch and size.
        f32 = torch.float32
        ys, xs = torch.meshgrid(
            torch.arange(h, device=device, dtype=f32),
            torch.arange(w, device=device, dtype=f32),
            indexing="ij",
        )
        grid = torch.stack((xs, ys), dim=2)[None, None]  # (1, 1, H, W, 2)
        anchor_grid = (self.anchors[i].float() * self.stride[i].float()).view(1, self.na, 1, 1, 2)
        return grid, anchor_grid

    def _apply(self, fn, recurse=True):  # noqa: ANN001 - nn.Module signature
        self._grids = {}  # anchors or stride may change with device or dtype
        return super()._apply(fn, recurse)

    def set_anchors_(self, anchors_grid: torch.Tensor) -> None:
        """Replaces the anchors, (nl, na, 2) in grid units, and clears cached grids."""
        if anchors_grid.shape != self.anchors.shape:
            raise InputError(f"anchors must have shape {tuple(self.anchors.shape)}, got {tuple(anchors_grid.shape)}")
        with torch.no_grad():
            self.anchors.copy_(anchors_grid)
        self._grids = {}

    def set_stride_(self, stride: torch.Tensor) -> None:
        """Sets the per-level strides (nl,) in pixels and clears cached grids."""
        with torch.no_grad():
            self.stride.copy_(stride)
        self._grids = {}

    @torch.no_grad()
    def initialize_biases(self, class_frequency: torch.Tensor | None = None) -> None:
        """Adds the YOLOv5 priors to the output biases: log(8 / (640 / s)^2) to objectness and
        log(0.6 / (nc - 0.999999)) (or log of the normalised `class_frequency` (nc,)) to the classes."""
        for conv, s in zip(self.output_convs(), self.stride.tolist(), strict=True):
            b = conv.bias.view(self.na, self.no)  # (na, no)
            b[:, 4] += math.log(OBJECTS_PER_IMAGE_PRIOR / (640 / s) ** 2)
            if class_frequency is None:
                b[:, 5:] += math.log(CLASS_PRIOR / (self.nc - 0.999999))
            else:
                b[:, 5:] += torch.log(class_frequency / class_frequency.sum()).to(b)


class Detect(DetectionHead):
    """YOLOv5 head: one 1x1 convolution per input map, (B, C_l, H_l, W_l) -> (B, na * no, H_l, W_l)."""

    def __init__(self, nc: int, anchors: Sequence[Sequence[float]], ch: Sequence[int]) -> None:
        super().__init__(nc, anchors)
        if len(ch) != self.nl:
            raise InputError(f"Detect: {len(ch)} input maps but {self.nl} anchor levels")
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)

    def predict_levels(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [conv(x) for conv, x in zip(self.m, xs, strict=True)]

    def output_convs(self) -> list[nn.Conv2d]:
        return list(self.m)

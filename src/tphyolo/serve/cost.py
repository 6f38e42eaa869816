"""What a request will cost, known before it runs, and the 422 of a request that costs too much.

Two numbers bound the work of one request, both from its decoded image sizes and its settings:

- views: model passes, summed over its images: windows per image (1 unsliced; the slicing grid with
  `slice`/`overlap`, plus the whole image with the service's full-image pass) x TTA passes (`augment`) x
  models; at most `ServeConfig.max_views`;
- candidates: boxes the merge of one image takes in, its views x `max_det` (each pass keeps up to max_det);
  at most `ServeConfig.max_candidates` per image.

A request over either is refused with 422 naming the options that raise that number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tphyolo.infer.slicing import SliceConfig
from tphyolo.serve.options import Settings
from tphyolo.serve.problems import RequestProblem


def _tiles_along(length: int, size: int, step: int) -> int:
    """len(tphyolo.ops.tiling.tile_starts(length, size, step)), without listing them."""
    return 1 if length <= size else math.ceil((length - size) / step) + 1


def window_count(height: int, width: int, slicing: SliceConfig | None, *, imgsz: int) -> int:
    """Windows `tphyolo.infer.slicing.slice_windows` cuts a height x width image into (1 without slicing)."""
    if slicing is None:
        return 1
    cfg = slicing.resolved(imgsz)
    step = max(1, round(cfg.size * (1.0 - cfg.overlap)))
    count = _tiles_along(height, cfg.size, step) * _tiles_along(width, cfg.size, step)
    return count + 1 if cfg.full and count > 1 else count


def _culprits(settings: Settings, *, given: Sequence[str], names: Sequence[str]) -> str:
    """The options among `names` that this request gave and that are in effect (a slice, TTA), else all."""
    in_effect = {"slice": settings.slicing is not None, "overlap": settings.slicing is not None,
                 "augment": settings.config.augment, "max_det": True}  # fmt: skip
    named = [n for n in names if n in given and in_effect[n]]
    return ", ".join(named or [n for n in names if in_effect[n]])


def check_cost(
    shapes: Sequence[tuple[int, int]],
    settings: Settings,
    *,
    models: int,
    max_views: int,
    max_candidates: int,
    given: Sequence[str] = (),
) -> int:
    """The views of a request of images of `shapes` (height, width) detected with `settings` by `models`
    models; raises a 422 RequestProblem naming the options (among `given`, the request's, when it set
    them) when they pass `max_views` or `max_candidates` (module docstring)."""
    config = settings.config
    runs = len(config.tta.passes()) * models
    views = [window_count(h, w, settings.slicing, imgsz=config.imgsz) * runs for h, w in shapes]
    total = sum(views)
    sliced = settings.slicing is not None
    if total > max_views:
        names = _culprits(settings, given=given, names=("slice", "overlap", "augment") if sliced else ("augment",))
        what = f"{len(shapes)} image(s)"
        if sliced:
            what += f" in windows of {settings.slicing.resolved(config.imgsz).size} px"
        raise RequestProblem(
            422,
            f"{names or 'images'}: {what} x {runs} pass(es) is {total:,} model passes, over the limit of "
            f"{max_views:,} per request (--max-views)",
        )
    worst = max(views, default=0)
    if worst * config.max_det > max_candidates:
        names = _culprits(settings, given=given, names=("max_det", "slice", "overlap", "augment"))
        raise RequestProblem(
            422,
            f"{names}: {worst:,} pass(es) x max_det {config.max_det:,} is {worst * config.max_det:,} boxes to merge "
            f"for one image, over the limit of {max_candidates:,} (--max-candidates)",
        )
    return total

"""Human-readable report of a scanned split: label counts, per-class instances, ignore regions, box sizes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tphyolo.data.scan import SplitScan


def split_statistics(scan: SplitScan) -> dict:
    """Numbers behind the report: per-class instance counts, ignore regions, box widths/heights (pixels)."""
    records = scan.records
    nc = len(scan.names)
    classes = np.concatenate([r.labels.classes for r in records]) if records else np.zeros(0, np.int64)
    boxes = np.concatenate([r.labels.boxes for r in records]) if records else np.zeros((0, 4), np.float32)
    wh = boxes[:, 2:] - boxes[:, :2]
    return {
        "instances": np.bincount(classes, minlength=nc).tolist()[:nc],
        "ignore_regions": int(sum(len(r.labels.ignore) for r in records)),
        "images_with_ignore": int(sum(len(r.labels.ignore) > 0 for r in records)),
        "widths": wh[:, 0],
        "heights": wh[:, 1],
    }


def _listed(header: str, lines: list[str], *, shown: int, indent: str) -> list[str]:
    """`header` then the first `shown` of `lines`, indented, and how many more there are."""
    out = [header] + [f"{indent}{line}" for line in lines[:shown]]
    if len(lines) > shown:
        out.append(f"{indent}... and {len(lines) - shown} more")
    return out


def format_problems(split: str, scan: SplitScan, *, shown: int = 5) -> str:
    """What the commands that use the split (train, val) must say about it: the files the scan skipped and the
    files it kept but uses only in part (`ScanReport.partial`), each counted and the first `shown` named with
    the reason; empty when there are none. `tphyolo data check` lists them all."""
    r = scan.report
    lines = []
    if r.problems:
        header = f"[{split}] {len(r.problems)} file(s) skipped (run `tphyolo data check` for the full report):"
        lines += _listed(header, r.problems, shown=shown, indent="  ")
    if r.partial:
        lines += _listed(f"[{split}] {len(r.partial)} file(s) used in part:", r.partial, shown=shown, indent="  ")
    return "\n".join(lines)


def shared_images_warning(train_files: Iterable[str], val_files: Sequence[str]) -> str:
    """A warning when validation images are also training images (empty when none is): the metrics then measure
    how well the model remembers, not how well it generalises (a bare folder given as data is both splits)."""
    train = set(train_files)
    shared = sum(f in train for f in val_files)
    if not shared:
        return ""
    return (
        f"{shared} of the {len(val_files)} validation images are also training images: the metrics will flatter "
        "the model; give the data as a yaml with separate train and val splits"
    )


def format_report(split: str, scan: SplitScan, *, max_problems: int = 20) -> str:
    """A multi-line report of one split (problems listed up to `max_problems`, then counted)."""
    r = scan.report
    stats = split_statistics(scan)
    lines = [f"[{split}] {r.summary()}"]
    lines.append(f"  label format: {', '.join(r.formats) or 'none found'}")
    if r.cache_path:
        lines.append(f"  scan cache: {r.cache_path}{' (loaded)' if r.from_cache else ' (written)'}")
    total = sum(stats["instances"])
    lines.append(f"  instances: {total} in {len(scan.records)} usable images")
    width = max((len(n) for n in scan.names), default=5)
    for i, (name, count) in enumerate(zip(scan.names, stats["instances"], strict=True)):
        lines.append(f"    {i:>3} {name:<{width}} {count:>8}")
    lines.append(f"  ignore regions: {stats['ignore_regions']} in {stats['images_with_ignore']} images")
    if total:
        w, h = stats["widths"], stats["heights"]
        area = w * h
        short = np.minimum(w, h)
        q = np.percentile(np.maximum(w, h), [0, 50, 100])
        lines.append(
            f"  box size (long side, px): min {q[0]:.1f}, median {q[1]:.1f}, max {q[2]:.1f}; "
            f"mean w x h {w.mean():.1f} x {h.mean():.1f}"
        )
        lines.append(
            f"  area classes: small (<32^2) {int((area < 32**2).sum())}, "
            f"medium {int(((area >= 32**2) & (area < 96**2)).sum())}, large (>=96^2) {int((area >= 96**2).sum())}; "
            f"short side < 8 px: {int((short < 8).sum())}"
        )
    for title, found in (("problems", r.problems), ("used in part", r.partial), ("notes", r.notes)):
        if found:
            lines += _listed(f"  {title} ({len(found)}):", found, shown=max_problems, indent="    ")
    return "\n".join(lines)

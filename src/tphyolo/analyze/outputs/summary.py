"""The one-screen summary of an analysis run, printed at its end."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

MAX_ROWS = 12  # lines or zones shown per sequence; the rest are in counts.json


def summary_text(reports: Sequence, save_dir: Path) -> str:
    """Per sequence (`SequenceReport`s): frames and the analytics' frames per second, each line's counts by
    direction and class, each zone's entries, exits and tracks inside at the end (entries - exits: the count the
video's panel shows), the mean speed per class; then the folder."""
    out = []
    for report in reports:
        rate = report.frames / report.seconds if report.seconds > 0 else float("inf")
        out.append(f"{report.name}: {report.frames} frames, analytics at {rate:.0f} frames/s")
        for name, per_direction in list(report.counts["lines"].items())[:MAX_ROWS]:
            forward, backward = per_direction["forward"], per_direction["backward"]
            out.append(f"  line {name}: {sum(forward.values())} forward{_classes(forward)}, "
                       f"{sum(backward.values())} backward{_classes(backward)}")  # fmt: skip
        for name, zone in list(report.counts["zones"].items())[:MAX_ROWS]:
            dwell = list(zone["dwell_s"].values())
            mean = f", mean dwell {sum(dwell) / len(dwell):.1f} s" if dwell else ""
            out.append(f"  zone {name}: {sum(zone['entries'].values())} entries, {sum(zone['exits'].values())} exits, "
                       f"{sum(zone['live'].values())} inside at the end{mean}")  # fmt: skip
        if report.mean_speeds:
            speeds = ", ".join(f"{label} {kmh:.1f}" for label, kmh in sorted(report.mean_speeds.items()))
            out.append(f"  mean speed (km/h): {speeds}")
    out.append(f"results in {save_dir}")
    return "\n".join(out)


def _classes(per_class: dict[str, int]) -> str:
    """` (bus 1, car 2)`, with its leading space, or '' for no class."""
    return " (" + ", ".join(f"{label} {n}" for label, n in sorted(per_class.items())) + ")" if per_class else ""

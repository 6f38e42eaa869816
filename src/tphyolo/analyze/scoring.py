"""Scoring counts: the line crossings and zone entries a pipeline counted against those counted from ground-truth
tracks with the same lines and zones (`tphyolo eval --task count`).

    truth = true_counts(Path("gt/"), "lines.yaml", source="frames/")     # {sequence: counts}, counts.json's form
    score = score_counts(truth, read_counts(Path("runs/analyze/exp")))
    print(score.table())

A ground-truth track is counted as `tphyolo analyze` counts (`tphyolo.analyze.counter`, `.zones`), in the ground
coordinates of the first frame: with `source`, the frames' camera motion is estimated (`cmc`) as for the
pipeline's own tracks. Each (sequence, line, direction, class) and (sequence, zone, "entries", class) is one
cell; the count error is the sum over cells of |found - true|, and its rate that sum over the true total.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tphyolo.analyze.config import AnalyzeConfig
from tphyolo.analyze.inputs.streams import track_streams
from tphyolo.analyze.pipeline import Analysis
from tphyolo.analyze.regions import load_regions
from tphyolo.errors import InputError


def true_counts(folder: Path, regions: str | Path, *, source=None, cmc: str = "sparse",
                config: AnalyzeConfig | None = None) -> dict[str, dict]:  # fmt: skip
    """{sequence: {"lines": ..., "zones": ...}} counted from the ground-truth track files in `folder`."""
    config = config or AnalyzeConfig()
    out = {}
    for stream in track_streams(Path(folder), source, cmc=cmc):
        analysis = None
        for frame in stream.frames:
            if analysis is None:
                size = None if frame.image is None else (frame.image.shape[1], frame.image.shape[0])
                analysis = Analysis(load_regions(regions, frame_size=size), names=stream.names, fps=1.0,
                                    config=config, frame_size=size or (1, 1), measure_speed=False)  # fmt: skip
            analysis.update(frame)
        out[stream.name] = analysis.counts() if analysis is not None else {"lines": {}, "zones": {}}
    return out


def read_counts(path: Path) -> dict[str, dict]:
    """{sequence: counts} of an analyze run: `path` a counts.json (sequence ""), or a run folder holding one, or
    one per sequence folder. Raises FileNotFoundError or ValueError naming the file."""
    path = Path(path)
    files = {"": path} if path.is_file() else {"": path / "counts.json"} if (path / "counts.json").is_file() else {
        p.parent.name: p for p in sorted(path.glob("*/counts.json"))}  # fmt: skip
    if not files:
        raise FileNotFoundError(f"{path}: no counts.json (an analyze run folder, or the file itself)")
    out = {}
    for name, file in files.items():
        try:
            counts = json.loads(file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise InputError(f"{file}: not JSON ({error.msg}, line {error.lineno})") from None
        if not isinstance(counts, dict) or not isinstance(counts.get("lines", {}), dict):
            raise InputError(f"{file}: expected {{'lines': {{...}}, 'zones': {{...}}}}")
        out[name] = counts
    return out


@dataclass(frozen=True)
class CountScore:
    """`cells`: (sequence, region, direction or "entries", class, true, found) per cell with a count."""

    cells: list[tuple[str, str, str, str, int, int]]

    @property
    def true_total(self) -> int:
        return sum(c[4] for c in self.cells)

    @property
    def error(self) -> int:
        """Sum over cells of |found - true|."""
        return sum(abs(c[5] - c[4]) for c in self.cells)

    @property
    def error_rate(self) -> float:
        return self.error / self.true_total if self.true_total else float(self.error > 0)

    def to_dict(self) -> dict:
        return {"true": self.true_total, "error": self.error, "error_rate": self.error_rate,
                "cells": [dict(zip(("sequence", "region", "direction", "class", "true", "found"), c, strict=True))
                          for c in self.cells]}  # fmt: skip

    def table(self) -> str:
        rows = [f"{'region':<16} {'direction':<10} {'class':<12} {'true':>5} {'found':>5}"]
        rows += [f"{(s + '/' if s else '') + r:<16} {d:<10} {c:<12} {t:>5} {f:>5}" for s, r, d, c, t, f in self.cells]
        rows.append(f"count error {self.error} of {self.true_total} ({100 * self.error_rate:.1f} %)")
        return "\n".join(rows)


def score_counts(truth: dict[str, dict], found: dict[str, dict]) -> CountScore:
    """Cells of `truth` and `found` ({sequence: counts}); one sequence on each side pair whatever their names.
    Raises ValueError naming a sequence of the truth that `found` lacks."""
    if len(truth) == 1 and len(found) == 1:
        found = {next(iter(truth)): next(iter(found.values()))}
    cells = []
    for sequence, true in truth.items():
        if sequence not in found:
            raise InputError(f"no counts for sequence {sequence!r} (found: {sorted(found)})")
        mine = found[sequence]
        single = "" if len(truth) == 1 else sequence
        for line, per in true["lines"].items():
            for direction in ("forward", "backward"):
                theirs = mine.get("lines", {}).get(line, {}).get(direction, {})
                cells += _cells(single, line, direction, per[direction], theirs)
        for zone, per in true["zones"].items():
            cells += _cells(
                single, zone, "entries", per["entries"], mine.get("zones", {}).get(zone, {}).get("entries", {})
            )
    return CountScore(cells)


def _cells(sequence: str, region: str, direction: str, true: dict, found: dict) -> list:
    return [(sequence, region, direction, label, int(true.get(label, 0)), int(found.get(label, 0)))
            for label in sorted(set(true) | set(found))]  # fmt: skip

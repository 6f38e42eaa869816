"""`tphyolo data check`: scan a dataset and print what it holds and what is wrong with it.
`tphyolo data slice`: write a sliced copy of a dataset for training on tiles (`tphyolo.data.tiles`)."""

from __future__ import annotations

import argparse
import sys

from tphyolo.data.dataset_config import load_data_config, missing_split
from tphyolo.data.scan_options import DataCommandInputs, ScanOptions
from tphyolo.data.tile_settings import DatasetSlicing
from tphyolo.errors import UsageError
from tphyolo.flags import add_flags, from_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", choices=["check", "slice"],
        help="check: scan and print a report per split; slice: write a sliced copy (--out) for training on tiles",
    )  # fmt: skip
    add_flags(parser, DataCommandInputs)
    add_flags(parser, ScanOptions)
    add_flags(parser, DatasetSlicing)


def run(args: argparse.Namespace) -> int:
    """check: exit code 0 when every scanned file is usable, 1 when some were skipped as corrupt; a split not on
    disk is one line (what is missing, where to get it) and the others are scanned; none on disk is an error.
    slice: 0."""
    slicing = from_flags(DatasetSlicing, args)
    if args.action == "check":
        if args.out is not None or slicing != DatasetSlicing():
            raise UsageError("--out and the tile flags (--size, --overlap, ...) are for 'data slice'")
        return _check(args)
    if args.out is None:
        raise UsageError("data slice needs --out DIR")
    return _slice(args, slicing)


def _slice(args: argparse.Namespace, slicing) -> int:
    from tphyolo.data.tiles import slice_dataset  # lazy: imports torch and cv2; 'tphyolo data -h' must not

    data = load_data_config(args.data, datasets_dir=args.datasets_dir)
    for line in same_images_warnings(data, _splits(args)):
        print(f"tphyolo data: warning: {line}", file=sys.stderr)
    result = slice_dataset(data, args.out, slicing, splits=_splits(args), log=print)
    print(f"data yaml for training: {result.yaml}")
    return 0


def same_images_warnings(data, splits: list[str]) -> list[str]:
    """One line for each of `splits` that names the same images as an earlier one: tiles of the training images
    in val score a model on what it trained on."""
    lines, seen = [], {}
    for split in splits:
        sources = tuple(sorted(source.resolve() for source in data.split(split)))
        if sources and sources in seen:
            lines.append(f"{data.source or data.root}: {split} names the same images as {seen[sources]} "
                         f"({', '.join(map(str, sources))}): the sliced {split} scores a model on its "
                         f"{seen[sources]} tiles")  # fmt: skip
        seen.setdefault(sources, split)
    return lines


def _splits(args: argparse.Namespace) -> list[str]:
    return [s.strip() for s in args.splits.split(",") if s.strip()]


def _check(args: argparse.Namespace) -> int:
    # lazy: these import torch and cv2; 'tphyolo data -h' must not
    from tphyolo.data.report import format_report
    from tphyolo.data.scan import scan_split

    data = load_data_config(args.data, datasets_dir=args.datasets_dir)
    print(f"data: {data.source or data.root}" + (f" ({data.nc} classes)" if data.nc else ""))
    corrupt, found = 0, ()
    seen: dict[tuple, str] = {}
    splits = _splits(args)
    missing = {split: line for split in splits if (line := missing_split(data, split)) is not None}
    for split, line in missing.items():
        print(f"[{split}] {line}")
    for split in splits:
        sources = tuple(source for source in data.split(split) if source.exists())
        if not sources:
            continue
        if sources in seen:
            print(f"[{split}] same images as [{seen[sources]}]")
            continue
        seen[sources] = split
        scan = scan_split(sources, names=data.names, cache=from_flags(ScanOptions, args).scan_cache)
        print(format_report(split, scan, max_problems=args.max_problems))
        corrupt += scan.report.counts["corrupt"]
        found = max(found, scan.names, key=len)
    if not data.nc and seen:  # no names given: the label format's own, or numbered by the labels
        print(f"data: {len(found)} classes found: {', '.join(found)}")
    if not seen and missing:
        raise FileNotFoundError(f"--data {args.data}: none of the splits {', '.join(splits)} is on disk")
    return 1 if corrupt else 0

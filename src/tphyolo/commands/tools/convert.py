"""`tphyolo convert`: checkpoints of the original code to ours, and VisDrone annotations to YOLO labels."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from tphyolo.flags import add_flags, flag


@dataclass(frozen=True)
class VisDroneConvertFlags:
    """How `convert visdrone` puts the images beside the labels."""

    copy_images: bool = flag(False, "--copy-images", help="copy images instead of linking them")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True, parser_class=type(parser))
    ckpt = kinds.add_parser("checkpoint", help="any checkpoint tphyolo reads -> the tphyolo format (weights_only)")
    ckpt.add_argument("src", help="input .pt (tphyolo, TPH-YOLOv5 or YOLOv5)")
    ckpt.add_argument("dst", help="output .pt")
    visdrone = kinds.add_parser("visdrone", help="VisDrone-DET images/ + annotations/ -> YOLO labels, data.yaml")
    visdrone.add_argument("src", help="a split folder (images/, annotations/) or a folder of such splits")
    visdrone.add_argument("dst", help="output folder: labels/, ignore/, images/ (links), data.yaml")
    add_flags(visdrone, VisDroneConvertFlags)


def run(args: argparse.Namespace) -> int:
    if args.kind == "checkpoint":
        from tphyolo.checkpoint.format import convert_checkpoint, load_checkpoint  # lazy: torch; not for -h

        out = convert_checkpoint(args.src, args.dst)
        ckpt = load_checkpoint(out)
        print(f"wrote {out}: {len(ckpt.model)} tensors, {ckpt.nc} classes ({', '.join(ckpt.names[:5])}...)")
        return 0
    from tphyolo.data.convert import convert_visdrone  # lazy: imports torch and cv2; not for -h

    data_yaml = convert_visdrone(args.src, args.dst, copy_images=args.copy_images)
    print(f"wrote {data_yaml}")
    return 0

"""What `tphyolo predict` adds for rasters too large to decode (orthomosaics): the flags, which sources run as
rasters, and the run (`tphyolo.predict.raster.predict_raster_into`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.image_limits import MAX_IMAGE_PIXELS
from tphyolo.data.files.raster import MAX_RASTER_PIXELS, RASTER_SUFFIXES
from tphyolo.errors import UsageError
from tphyolo.flags import AT_LEAST_ONE, add_flags, flag
from tphyolo.infer.slicing import AUTO, SliceConfig


@dataclass(frozen=True)
class RasterFlags:
    """What a raster run (GeoTIFF, tile by tile) writes and reads beyond the image outputs."""

    save_geojson: bool = flag(False, "--save-geojson", help="rasters (GeoTIFF): detections as GeoJSON polygons in "
                              "the raster's CRS (STEM.geojson)")  # fmt: skip
    to_crs: str | None = flag(None, "--to-crs", metavar="CRS",
                              help="reproject --save-geojson to this CRS (e.g. EPSG:4326)")  # fmt: skip
    bands: tuple[int, ...] | None = flag(
        None, "--bands", bounds=AT_LEAST_ONE, metavar="N",
        help="raster bands read: one (grey) or three (R G B), 1-based (default: 1 2 3, or 1 of a one-band raster)",
    )  # fmt: skip
    max_pixels: int = flag(MAX_RASTER_PIXELS, "--max-pixels", bounds=AT_LEAST_ONE, metavar="N",
                           help="rasters: refuse one whose header declares more pixels than this (default 10^10, "
                                "e.g. 100,000 x 100,000 px)")  # fmt: skip


def add_raster_flags(parser: argparse.ArgumentParser) -> None:
    """--save-geojson, --to-crs, --bands, --max-pixels (`RasterFlags`)."""
    add_flags(parser, RasterFlags)


def raster_source(args: argparse.Namespace) -> Path | None:
    """The raster `args.source` names when it runs tile by tile, else None: a .tif/.tiff/.vrt file given with a
    raster flag (--save-geojson, --to-crs, --bands), or, with rasterio installed, one that has a CRS or is larger
    than an image may be decoded whole (MAX_IMAGE_PIXELS). Raises UsageError for raster flags without one."""
    asked = [name for name, on in (("--save-geojson", args.save_geojson), ("--to-crs", args.to_crs is not None),
                                   ("--bands", args.bands is not None)) if on]  # fmt: skip
    path = Path(str(args.source))
    if not (path.suffix.lower() in RASTER_SUFFIXES and path.is_file()):
        if asked:
            raise UsageError(f"{' and '.join(asked)} need(s) a raster --source (.tif, .tiff, .vrt)")
        return None
    if args.to_crs is not None and not args.save_geojson:
        raise UsageError("--to-crs reprojects --save-geojson; add --save-geojson or drop it")
    if args.to_crs is not None:
        from tphyolo.predict.geojson import checked_crs  # lazy: it imports torch; 'tphyolo predict -h' must not

        try:
            checked_crs(args.to_crs)
        except ValueError as error:
            raise UsageError(f"--to-crs {args.to_crs}: {error}") from None
    if asked:
        return _checked(path, args)
    try:
        import rasterio  # lazy: an optional extra, needed only for a raster given without raster flags
    except ImportError:
        return None
    with rasterio.open(path) as dataset:
        large = dataset.crs is not None or dataset.width * dataset.height > MAX_IMAGE_PIXELS
    return _checked(path, args) if large else None


def _checked(path: Path, args: argparse.Namespace) -> Path:
    """`path`, once the flags that cannot apply to a raster are refused (before any model is loaded)."""
    if args.slice_full:
        raise UsageError("--slice-full: a raster is run tile by tile, never whole")
    return path


def run_raster(
    save_dir: Path,
    predictor,
    path: Path,
    args: argparse.Namespace,
    slicing,
    *,
    dist,
    settings: list[str] | None,
    settings_file: Path,
) -> int:
    """Predict the raster `path` into `save_dir` with the command's output flags, and print what was done (rank
    0); returns the exit code (1 when no tile could be read). A new run (`settings`: its saved flags) records
    them in `settings_file` with the weights' SHA-256 and the raster's size once the raster opened; a resumed one
    (`args.resume`, `args.saved_run`) is checked against them. Under torchrun (`dist`) the ranks share the rows
    of tiles."""
    # lazy: these import torch and cv2; 'tphyolo predict -h' must not
    from tphyolo.predict.raster import RasterCallbacks, RasterOutputs, RasterRead, predict_raster_into
    from tphyolo.predict.resume import check_raster_resumed, raster_fingerprint, run_fingerprint

    def record_or_check(raster, tiles: int) -> None:
        if args.to_crs is not None and raster.crs is None:
            raise UsageError(f"--to-crs {args.to_crs}: {path} has no CRS to reproject from")
        if dist.is_main:
            print(f"{path.name}: {raster.width}x{raster.height} px, {tiles:,} tiles to run")
        fingerprint = raster_fingerprint(path, width=raster.width, height=raster.height)
        if args.resume is not None:
            check_raster_resumed(args.saved_run, path, fingerprint, where=str(settings_file))
        elif dist.is_main:
            record = {"argv": settings, **run_fingerprint(args.weights, [path]), "raster": fingerprint}
            write_text_atomic(settings_file, yaml.safe_dump(record))

    def note(text: str) -> None:
        print(f"tphyolo predict: warning: {text}", file=sys.stderr)

    outputs = RasterOutputs(save_geojson=args.save_geojson or not (args.save_txt or args.save_json),
                            to_crs=args.to_crs, save_txt=args.save_txt, save_conf=args.save_conf,
                            save_json=args.save_json)  # fmt: skip
    read = RasterRead(bands=args.bands, max_pixels=args.max_pixels)
    run = predict_raster_into(save_dir, predictor, path, slicing=slicing or SliceConfig(AUTO), outputs=outputs,
                              read=read, progress=True, resume=args.resume is not None, dist=dist,
                              calls=RasterCallbacks(on_open=record_or_check, on_note=note))  # fmt: skip
    if run is None:
        return 0
    crs = run.crs or "pixels (the raster has no CRS)"
    before = f", {run.rows_before} of {run.rows} rows finished before" if run.rows_before else ""
    unreadable = f", {run.unreadable} unreadable skipped" if run.unreadable else ""
    print(f"{len(run.detections)} detections in {path.name} ({run.width}x{run.height}, {crs}): {run.tiles} tiles, "
          f"{run.skipped} NoData skipped{unreadable}{before}; results in {save_dir}")  # fmt: skip
    if run.unreadable == run.tiles:
        print(f"tphyolo predict: error: {path}: no tile could be read (named above)", file=sys.stderr)
        return 1
    return 0

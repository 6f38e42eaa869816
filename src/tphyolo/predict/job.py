"""What one prediction run is asked to do: the detector (`DetectorSpec`: its weights and settings), what to
predict on (`PredictInputs`), what a raster run (GeoTIFF, tile by tile) writes and reads (`RasterSettings`), which files
to write, how drawn images look and where the run folder goes. Each field is also a `tphyolo predict` flag; the
module imports nothing heavy, so that building the command line stays light. `tphyolo.predict.run.run_predict`
runs it.

    job = PredictJob(DetectorSpec(("best.pt",)), PredictInputs(source="images/"), outputs=OutputSettings(save_txt=True))
    run = run_predict(job, runtime=RuntimeConfig())
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tphyolo.data.files.raster import MAX_RASTER_PIXELS
from tphyolo.flags import AT_LEAST_ONE, check_field_types, flag
from tphyolo.infer.spec import DetectorSpec
from tphyolo.predict.draw_style import DEFAULT_STYLE, DrawStyle
from tphyolo.predict.outputs import OutputSettings
from tphyolo.runtime.run_dir import OutputDir

DEFAULT_PROJECT = "runs/predict"
SETTINGS_FILE = "args.yaml"  # a run folder's settings, which a resume reads


@dataclass(frozen=True)
class PredictInputs:
    """What to predict on (`source`), every `vid_stride`-th video frame; or, with `resume`, the run folder to
    continue, whose saved settings give the rest (the source and the detector's weights then must be those the
    run recorded)."""

    source: str | None = flag(None, "--source", help="image, folder, glob, .txt list of files, video, webcam index "
                              "(0) or rtsp/rtmp/http(s) video URL (required unless --resume)")  # fmt: skip
    vid_stride: int = flag(1, "--vid-stride", bounds=AT_LEAST_ONE, metavar="N",
                           help="read every N-th frame of videos and streams")  # fmt: skip
    resume: Path | None = flag(None, "--resume", metavar="RUN_DIR", help="continue an interrupted run in RUN_DIR "
                               "with its settings: finished outputs are kept, the rest done")  # fmt: skip

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds


@dataclass(frozen=True)
class RasterSettings:
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

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds

    def asked(self) -> list[str]:
        """The flags given that only a raster source takes."""
        given = (("--save-geojson", self.save_geojson), ("--to-crs", self.to_crs is not None),
                 ("--bands", self.bands is not None))  # fmt: skip
        return [name for name, on in given if on]


@dataclass(frozen=True)
class PredictJob:
    """One run of `tphyolo predict`: the `detector` (`DetectorSpec`: weights, inference settings, slicing, crop
    classifier; its runtime and device are the run's unless it names them), `inputs`, what a raster source
    writes and reads (`raster`), the files to write (`outputs`), how drawn images look (`style`) and where the
    run folder goes (`output`, under DEFAULT_PROJECT by default; a resumed run writes into `inputs.resume`)."""

    detector: DetectorSpec
    inputs: PredictInputs = field(default_factory=PredictInputs)
    raster: RasterSettings = field(default_factory=RasterSettings)
    outputs: OutputSettings = field(default_factory=OutputSettings)
    style: DrawStyle = DEFAULT_STYLE
    output: OutputDir = field(default_factory=OutputDir)

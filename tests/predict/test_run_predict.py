"""`run_predict(job)` from Python, no command line: a folder of images predicted, then resumed from its run
folder with nothing left to do, and refused when it asks for other results (naming each setting); a raster run
tile by tile with its GeoJSON and the record a resume checks; and raster settings refused without a raster."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from tests.predict.geotiffs import random_checkpoint, scene, write_geotiff

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import SliceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.predict.draw_style import DrawStyle
from tphyolo.predict.job import PredictInputs, PredictJob, RasterSettings
from tphyolo.predict.outputs import OutputSettings
from tphyolo.predict.run import raster_source, run_predict
from tphyolo.predict.runner.resume import check_same_job
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.console import RunEvents
from tphyolo.runtime.run_dir import OutputDir, job_data

INFERENCE = InferenceConfig(imgsz=64, conf=0.001, max_det=20)


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    return random_checkpoint(tmp_path_factory.mktemp("weights"))


def test_a_folder_job_runs_and_resumes_from_python(weights, visdrone_mini, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for image in sorted((visdrone_mini / "images").glob("*.jpg"))[:3]:
        shutil.copy(image, source / image.name)
    detector = DetectorSpec((str(weights),), inference=INFERENCE, device="cpu")
    job = PredictJob(detector, PredictInputs(source=str(source)),
                     outputs=OutputSettings(save_img=False, save_txt=True, save_json=True),
                     output=OutputDir(project=str(tmp_path), name="py"))  # fmt: skip
    run = run_predict(job)
    assert run.save_dir == tmp_path / "py" and run.raster is None and run.is_main
    assert (run.folder.files, run.folder.skipped, run.folder.finished_before) == (3, 0, 0)
    assert run.folder.detections == len(json.loads((run.save_dir / "predictions.json").read_text())) > 0
    settings = yaml.safe_load((run.save_dir / "args.yaml").read_text())
    assert settings["job"] == job_data(job) and list(settings["weights_sha256"]) == [str(weights)]
    assert sorted(p.name for p in (run.save_dir / "labels").iterdir()) == sorted(f"{p.stem}.txt" for p in
                                                                               source.iterdir())  # fmt: skip
    whole = (run.save_dir / "predictions.json").read_bytes()
    resumed = run_predict(PredictJob(detector, PredictInputs(source=str(source), resume=run.save_dir),
                                     outputs=job.outputs))  # fmt: skip
    assert (resumed.save_dir, resumed.folder.finished_before) == (run.save_dir, 3)
    assert resumed.folder.detections == run.folder.detections
    assert (run.save_dir / "predictions.json").read_bytes() == whole
    (source / sorted(p.name for p in source.iterdir())[0]).unlink()  # a source gone: named, the rest goes on
    notes: list[str] = []
    again = run_predict(PredictJob(detector, PredictInputs(source=str(source), resume=run.save_dir),
                                   outputs=job.outputs), events=RunEvents(note=notes.append))  # fmt: skip
    assert len(notes) == 2 and notes[0].endswith("of the run is gone; the rest goes on")
    assert "is not one of this run's (a source removed?); its unit is redone" in notes[1]  # its journal line
    assert again.folder.finished_before == 2
    other = replace(detector, inference=replace(INFERENCE, conf=0.5, imgsz=96), runtime=None, device="cpu")
    with pytest.raises(ValueError, match=r"other settings \(detector\.inference\.imgsz 64 then, 96 now; "
                                         r"detector\.inference\.conf 0\.001 then, 0\.5 now\)"):  # fmt: skip
        run_predict(PredictJob(other, PredictInputs(source=str(source), resume=run.save_dir), outputs=job.outputs))
    with pytest.raises(ValueError, match=r"outputs\.save_txt True then, False now"):  # other files written
        run_predict(PredictJob(detector, PredictInputs(source=str(source), resume=run.save_dir)))


def test_a_raster_job_runs_tile_by_tile_from_python(weights, tmp_path):
    ortho = write_geotiff(tmp_path / "small.tif", scene(160, 240, [(40, 40, 90, 80, 0)], border=64))
    opened: list[tuple] = []
    job = PredictJob(DetectorSpec((str(weights),), inference=INFERENCE, device="cpu", slicing=SliceConfig(64)),
                     PredictInputs(source=str(ortho)), RasterSettings(save_geojson=True),
                     output=OutputDir(str(tmp_path), "geo"))  # fmt: skip
    run = run_predict(job, events=RunEvents(raster_opened=lambda *a: opened.append(a)))
    assert run.folder is None and opened == [(ortho, 240, 160, 15)]  # 5 columns x 3 rows of 64 px
    assert (run.raster.tiles, run.raster.rows) == (15, 3) and run.raster.crs == "EPSG:32633"
    features = json.loads((run.save_dir / "small.geojson").read_text())["features"]
    assert len(features) == len(run.raster.detections) > 0
    record = yaml.safe_load((run.save_dir / "args.yaml").read_text())
    assert record["raster"] == {"bytes": ortho.stat().st_size, "width": 240, "height": 160}
    assert record["sources"] == [str(ortho)] and record["job"] == job_data(job)


def test_raster_settings_need_a_raster_and_a_raster_is_never_read_whole(weights, tmp_path):
    image = tmp_path / "a.jpg"
    image.write_bytes(b"")
    detector, inputs = DetectorSpec((str(weights),)), PredictInputs(source=str(image))
    with pytest.raises(ValueError, match=r"--save-geojson and --bands need\(s\) a raster --source"):
        raster_source(PredictJob(detector, inputs, raster=RasterSettings(save_geojson=True, bands=(1,))))
    assert raster_source(PredictJob(detector, inputs)) is None
    ortho = PredictInputs(source=str(write_geotiff(tmp_path / "o.tif", scene(64, 64, []))))
    with pytest.raises(ValueError, match="--slice-full: a raster is run tile by tile, never whole"):
        raster_source(PredictJob(DetectorSpec("w.pt", slicing=SliceConfig(64, full=True)), ortho))
    with pytest.raises(ValueError, match="--to-crs reprojects --save-geojson"):
        raster_source(PredictJob(detector, ortho, raster=RasterSettings(to_crs="EPSG:4326")))
    assert raster_source(PredictJob(detector, ortho)) == Path(ortho.source)  # it has a CRS
    with pytest.raises(ValueError, match="a prediction needs a source"):
        run_predict(PredictJob(detector))


def test_a_resume_may_change_only_where_and_how_fast_it_runs(tmp_path):
    """`check_same_job`: the runtime, device, batch size, run folder and source text may differ from the saved
    job's; every other setting is named with both values."""
    job = PredictJob(DetectorSpec(("w.pt",)), PredictInputs(source="a"), outputs=OutputSettings(save_txt=True))
    saved = {"job": job_data(job)}
    free = PredictJob(DetectorSpec(("w.pt",), inference=replace(InferenceConfig(), batch=8), device="cuda:1",
                                   runtime=RuntimeConfig(amp="off")),
                      PredictInputs(source="b", resume=tmp_path), outputs=job.outputs, output=OutputDir(name="x"))
    check_same_job(saved, free, where="args.yaml")
    changed = replace(job, style=DrawStyle(hide_conf=True), raster=RasterSettings(max_pixels=10))
    with pytest.raises(ValueError, match=r"raster.max_pixels 10000000000 then, 10 now; style.hide_conf False then"):
        check_same_job(saved, changed, where="args.yaml")

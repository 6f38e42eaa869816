"""SRT telemetry: parsed from sidecars the tests write (both DJI layouts), the GSD and WGS84 positions it gives
on a synthetic-mot sequence, and the fallback to pixels with one warning for a missing or garbled file."""

import csv
import json

import cv2
import numpy as np
import pytest
import yaml
from tests.analyze.simulated import LINES, Truth, record, simulate

from tphyolo.analyze import read_srt
from tphyolo.analyze.geo import EARTH_RADIUS, FULL_FRAME_WIDTH_MM
from tphyolo.cli import main
from tphyolo.data.builtin.synthetic_mot import FRAME_SIZE, WORLD_GSD

LAT0, LON0 = 47.3769, 8.5417  # the world's top-left corner
FOCAL = 24.0


def world_to_wgs84(xy):
    """Latitude, longitude of world pixels (x east, y south, WORLD_GSD metres each)."""
    xy = np.asarray(xy, float).reshape(-1, 2)
    north, east = -xy[:, 1] * WORLD_GSD, xy[:, 0] * WORLD_GSD
    return np.stack([LAT0 + np.degrees(north / EARTH_RADIUS),
                     LON0 + np.degrees(east / (EARTH_RADIUS * np.cos(np.radians(LAT0))))], axis=1)  # fmt: skip


def srt_entry(index, lat, lon, height, yaw):
    start, end = (index - 1) * 40, index * 40
    return (f"{index}\n00:00:{start // 1000:02d},{start % 1000:03d} --> 00:00:{end // 1000:02d},{end % 1000:03d}\n"
            f'<font size="28">FrameCnt: {index}, DiffTime: 40ms\n2024-05-01 10:00:00.{start % 1000:03d}\n'
            f"[iso: 100] [shutter: 1/500.0] [fnum: 1.7] [ev: 0] [focal_len: {FOCAL:.2f}] [latitude: {lat:.8f}] "
            f"[longitude: {lon:.8f}] [rel_alt: {height:.3f} abs_alt: {height + 400:.3f}] "
            f"[gb_yaw: {yaw:.3f}]</font>\n")  # fmt: skip


def write_srt(path, truth):
    """The sidecar of `truth`'s sequence: the drone above the frame centre, at the height that gives each
    frame's GSD with a 24 mm equivalent lens, heading as the camera turns."""
    camera, entries = truth.sequence.camera, []
    for t in range(len(camera.zoom)):
        ((lat, lon),) = world_to_wgs84(camera.centre[t])
        height = truth.gsd(t) * FOCAL * FRAME_SIZE[0] / FULL_FRAME_WIDTH_MM
        entries.append(srt_entry(t + 1, lat, lon, height, float(camera.angle[t])))
    path.write_text("\n".join(entries), encoding="utf-8")
    return path


def test_reads_both_layouts(tmp_path):
    new = tmp_path / "new.SRT"
    new.write_text(srt_entry(1, 47.5, 8.25, 60.0, 15.0) + "\n" + srt_entry(2, 47.6, 8.35, 61.0, 16.0))
    old = tmp_path / "old.srt"
    old.write_text("1\n00:00:00,000 --> 00:00:01,000\nHOME(8.1,47.1) 2017.08.05 14:11:51\n"
                   "GPS(8.541700,47.376900,20) BAROMETER:55.5\nISO:100 Shutter:60 EV:0 Fnum:F2.2\n\n"
                   "2\n00:00:01,000 --> 00:00:02,000\nGPS(8.541800,47.377000,20) BAROMETER:56.0\n")  # fmt: skip
    frames = read_srt(new)
    assert list(frames) == [1, 2] and frames[2].latitude == 47.6 and frames[2].longitude == 8.35
    assert frames[1].height == 60.0 and frames[1].focal_35mm == 24.0 and frames[1].yaw == 15.0
    frames = read_srt(old)
    assert frames[1].latitude == 47.3769 and frames[1].longitude == 8.5417 and frames[1].height == 55.5
    assert frames[2].height == 56.0 and frames[2].yaw == 0.0 and frames[2].focal_35mm is None


def test_a_garbled_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "bad.SRT"
    path.write_bytes(b"1\n00:00:00,000 --> 00:00:00,033\n[latitude: north] [longitude: 8.1]\n\x00\xff garbage\n")
    with pytest.raises(ValueError, match=f"^{path}: no entry with latitude, longitude and height"):
        read_srt(path)


@pytest.fixture(scope="module")
def sequence(tmp_path_factory):
    root = tmp_path_factory.mktemp("geo")
    truth = Truth(simulate(draw=True, length=60))
    record(truth, root)
    return truth, root


def read_csv(path):
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_the_sidecar_gives_speeds_and_wgs84_positions_without_flags(sequence, tmp_path):
    truth, root = sequence
    srt = write_srt(tmp_path / "seq.SRT", truth)
    argv = ["analyze", "--tracks", str(root / "tracks"), "--source", str(root / "frames"), "--lines",
            str(root / "lines.yaml"), "--srt", str(srt), "--fps", "25", "--no-save-video", "--project", str(tmp_path),
            "--name", "run"]  # fmt: skip
    assert main(argv) == 0
    geo = read_csv(tmp_path / "run" / "tracks_geo.csv")
    assert len(geo) == len(truth.rows)
    found = np.array([[float(r["latitude"]), float(r["longitude"])] for r in geo])
    true = world_to_wgs84([truth.world_centre(int(r["track"]), int(r["frame"]) - 1) for r in geo])
    metres = np.hypot((found[:, 0] - true[:, 0]) * 111_320, (found[:, 1] - true[:, 1]) * 111_320 * np.cos(0.8269))
    assert np.median(metres) < 0.1 and metres.max() < 0.5  # a box's centre to within a few pixels
    speeds = read_csv(tmp_path / "run" / "tracks_speed.csv")
    by_track = {}
    for row in speeds:
        by_track.setdefault(int(row["track"]), []).append(float(row["speed_kmh"]))
    errors = [np.mean(v) / truth.speed_kmh(k) - 1 for k, v in by_track.items()
              if len(v) >= 20 and np.hypot(*truth.sequence.velocity[k - 1]) >= 1.0]  # fmt: skip
    assert len(errors) >= 5 and np.median(np.abs(errors)) < 0.05


@pytest.mark.parametrize("content", [None, b"not telemetry at all\n"])
def test_a_missing_or_garbled_sidecar_leaves_pixels_with_one_warning(sequence, tmp_path, capsys, content):
    _, root = sequence
    srt = tmp_path / "seq.SRT"
    if content is not None:
        srt.write_bytes(content)
    argv = ["analyze", "--tracks", str(root / "tracks"), "--source", str(root / "frames"), "--lines",
            str(root / "lines.yaml"), "--srt", str(srt), "--no-save-video", "--project", str(tmp_path),
            "--name", "run"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    warnings = [line for line in (captured.out + captured.err).splitlines() if "positions stay in pixels" in line]
    assert len(warnings) == 1 and str(srt) in warnings[0]
    names = {p.name for p in (tmp_path / "run").iterdir()}
    assert "counts.json" in names and "tracks_geo.csv" not in names and "tracks_speed.csv" not in names


def test_lines_in_latitude_longitude_count_as_the_same_lines_in_pixels(sequence, tmp_path):
    truth, root = sequence
    srt = write_srt(tmp_path / "seq.SRT", truth)
    to_world = cv2.invertAffineTransform(truth.sequence.camera.affine(0))  # first-frame pixels -> world
    entries = [{"name": n, "latlon": world_to_wgs84(np.asarray(p, float) @ to_world[:, :2].T + to_world[:, 2]).tolist()}
               for n, p in LINES]  # fmt: skip
    lines = tmp_path / "latlon.yaml"
    lines.write_text(yaml.safe_dump({"lines": entries}))
    counts = {}
    for name, path in (("degrees", lines), ("pixels", root / "lines.yaml")):
        argv = ["analyze", "--tracks", str(root / "tracks"), "--source", str(root / "frames"), "--lines", str(path),
                "--srt", str(srt), "--no-save-video", "--project", str(tmp_path), "--name", name]  # fmt: skip
        assert main(argv) == 0
        counts[name] = json.loads((tmp_path / name / "counts.json").read_text())["lines"]
    assert counts["degrees"] == counts["pixels"]
    assert sum(sum(c.values()) for per in counts["pixels"].values() for c in per.values()) >= 5


def test_lines_in_latitude_longitude_without_telemetry_get_one_line(sequence, tmp_path, capsys):
    _, root = sequence
    lines = tmp_path / "latlon.yaml"
    lines.write_text("lines:\n  - {name: a, latlon: [[47.1, 8.1], [47.2, 8.2]]}\n")
    argv = ["analyze", "--tracks", str(root / "tracks"), "--source", str(root / "frames"), "--lines", str(lines),
            "--gsd", "0.1", "--no-save-video", "--project", str(tmp_path)]  # fmt: skip
    assert main(argv) == 2
    assert f"{lines}: line 'a' is in latitude/longitude: it needs the video's SRT telemetry" in capsys.readouterr().err


def test_frame_telemetry_gives_a_frames_entry_else_the_nearest_earlier_one():
    from tphyolo.analyze.inputs.telemetry import FrameTelemetry, Telemetry

    a, b = Telemetry(47.0, 8.0, 60.0), Telemetry(47.1, 8.1, 61.0)
    frames = FrameTelemetry({30: b, 10: a})  # in any order, as an SRT's FrameCnt may be
    assert [frames.at(n) for n in (9, 10, 11, 29, 30, 10**9)] == [None, a, a, a, b, b] and len(frames) == 2

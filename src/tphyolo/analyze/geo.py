"""Image pixels to the ground in metres per pixel and in WGS84, from a frame's telemetry
(`tphyolo.analyze.inputs.telemetry`), for a camera looking straight down.

The ground sampling distance (GSD) is how many metres of ground one pixel covers; for a lens of focal length
`focal_mm` on a sensor `sensor_mm` wide (the real ones, or a 35 mm equivalent and 36 mm), `altitude` metres
above the ground, an image `image_width` pixels wide:

    GSD = altitude * sensor_mm / (focal_mm * image_width)      metres per pixel

The drone is above the image centre; a pixel's offset from the centre times the GSD (from the drone's height
and the 35 mm equivalent focal length) is metres east and north once turned by the image's heading
(`Telemetry.yaw`: up is that many degrees clockwise from north). Over the few hundred metres a frame covers,
degrees follow from metres on a sphere of the WGS84 equatorial radius (an equirectangular step; its error
there is far below a pixel).
"""

from __future__ import annotations

import numpy as np

from tphyolo.analyze.inputs.telemetry import Telemetry
from tphyolo.errors import InputError

EARTH_RADIUS = 6_378_137.0  # metres, WGS84 semi-major axis
FULL_FRAME_WIDTH_MM = 36.0  # the sensor 35 mm equivalent focal lengths refer to
DEFAULT_FOCAL_35MM = 24.0  # the wide lens most camera drones carry, when the SRT does not say


def ground_sampling_distance(altitude: float, *, focal_mm: float, sensor_mm: float, image_width: int) -> float:
    """Metres per pixel (see the module docstring); ValueError naming the value for any that is not > 0."""
    for name, value in (("altitude", altitude), ("focal_mm", focal_mm), ("sensor_mm", sensor_mm),
                        ("image_width", image_width)):  # fmt: skip
        if not value > 0:
            raise InputError(f"{name} must be > 0, got {value}")
    return altitude * sensor_mm / (focal_mm * image_width)


def telemetry_gsd(telemetry: Telemetry, image_width: int) -> float:
    """Metres per pixel of a frame `image_width` pixels wide filmed from `telemetry`."""
    focal = telemetry.focal_35mm if telemetry.focal_35mm and telemetry.focal_35mm > 0 else DEFAULT_FOCAL_35MM
    return ground_sampling_distance(telemetry.height, focal_mm=focal, sensor_mm=FULL_FRAME_WIDTH_MM,
                                    image_width=image_width)  # fmt: skip


def pixels_to_wgs84(points: np.ndarray, telemetry: Telemetry, *, image_size: tuple[int, int],
                    gsd: float) -> np.ndarray:  # fmt: skip
    """(N, 2) latitude, longitude (degrees) of image points (N, 2) of a frame of `image_size` (width, height)."""
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    right = (points[:, 0] - image_size[0] / 2) * gsd  # metres along the image's x
    up = (image_size[1] / 2 - points[:, 1]) * gsd  # metres along the image's up
    yaw = np.radians(telemetry.yaw)
    east = right * np.cos(yaw) + up * np.sin(yaw)
    north = -right * np.sin(yaw) + up * np.cos(yaw)
    latitude = telemetry.latitude + np.degrees(north / EARTH_RADIUS)
    longitude = telemetry.longitude + np.degrees(east / (EARTH_RADIUS * np.cos(np.radians(telemetry.latitude))))
    return np.stack([latitude, longitude], axis=1)


def wgs84_to_pixels(latlon: np.ndarray, telemetry: Telemetry, *, image_size: tuple[int, int],
                    gsd: float) -> np.ndarray:  # fmt: skip
    """(K, 2) image points of latitude, longitude pairs (K, 2) in the frame filmed from `telemetry`: the
    inverse of `pixels_to_wgs84`."""
    latlon = np.asarray(latlon, dtype=np.float64).reshape(-1, 2)
    north = np.radians(latlon[:, 0] - telemetry.latitude) * EARTH_RADIUS
    east = np.radians(latlon[:, 1] - telemetry.longitude) * EARTH_RADIUS * np.cos(np.radians(telemetry.latitude))
    yaw = np.radians(telemetry.yaw)
    right = east * np.cos(yaw) - north * np.sin(yaw)
    up = east * np.sin(yaw) + north * np.cos(yaw)
    return np.stack([image_size[0] / 2 + right / gsd, image_size[1] / 2 - up / gsd], axis=1)

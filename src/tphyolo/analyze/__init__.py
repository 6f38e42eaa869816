"""Drone video analytics on top of tracking: counts across lines (`Counter`), zone occupancy and dwell
(`Zones`), ground speed in km/h (`Speed`) and occupancy heatmaps (`Heatmap`), all in the ground coordinates of
the first frame, so that they stay right while the camera pans, zooms and turns (`GroundMotion`, fed the
tracker's camera-motion estimate); `analyze` runs them over a video, a detection run or a tracking run and
writes the outputs.

Importing this package imports none of its modules; each name is imported from its module on first use.
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.analyze.counter": ("Counter",),
        "tphyolo.analyze.events": ("Event",),
        "tphyolo.analyze.geo": ("ground_sampling_distance", "pixels_to_wgs84"),
        "tphyolo.analyze.inputs.telemetry": ("Telemetry", "read_srt"),
        "tphyolo.analyze.config": ("AnalyzeConfig",),
        "tphyolo.analyze.heatmap": ("Heatmap",),
        "tphyolo.analyze.motion": ("GroundMotion",),
        "tphyolo.analyze.pipeline": ("Analysis", "AnalyzeInput", "analyze"),
        "tphyolo.analyze.points": ("TrackPoints", "anchor_points"),
        "tphyolo.analyze.regions": ("Line", "Regions", "Zone", "load_regions"),
        "tphyolo.analyze.scoring": ("CountScore", "read_counts", "score_counts", "true_counts"),
        "tphyolo.analyze.speed": ("Speed",),
        "tphyolo.analyze.zones": ("Zones",),
    },
)

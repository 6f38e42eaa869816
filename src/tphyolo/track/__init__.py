"""Multi-object tracking on top of any detector: the tracker contract (`MultiObjectTracker`, `Tracks`), the
registry of trackers (`make_tracker`, `TRACKERS`), ByteTrack and BoT-SORT (`ByteTracker`, `TrackerConfig`), OC-SORT
(`OCSort`, `OCSortConfig`) and camera-motion compensation (`CameraMotion`); on top of them, tracking whole
sources (`tphyolo.track.stream.Tracker`, which the package exports as `tphyolo.Tracker`) and the runs of
`tphyolo track` (`track_job`, `TrackJob`).

Importing this package imports none of its modules; each name is imported from its module on first use.
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.track.cmc": ("CameraMotion",),
        "tphyolo.track.config": ("CMC_METHODS", "TRACKER_PRESETS", "TrackerConfig", "tracker_config"),
        "tphyolo.track.interface": ("MultiObjectTracker", "Tracks"),
        "tphyolo.track.kalman": ("KalmanBoxFilter",),
        "tphyolo.track.matching": ("Matching", "match"),
        "tphyolo.track.ocsort": ("OCSort", "OCSortConfig"),
        "tphyolo.track.job": ("TrackJob",),
        "tphyolo.track.registry": ("TRACKERS", "TRACKER_NAMES", "make_tracker", "tracker_settings"),
        "tphyolo.track.run": ("track_job",),
        "tphyolo.track.tracker": ("ByteTracker",),
    },
)

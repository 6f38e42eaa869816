"""Multi-object tracking on top of any detector: ByteTrack and BoT-SORT (`Tracker`), their settings
(`TrackerConfig`, `tracker_config`) and camera-motion compensation (`CameraMotion`).

Importing this package imports none of its modules; each name is imported from its module on first use.
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.track.cmc": ("CameraMotion",),
        "tphyolo.track.config": ("CMC_METHODS", "TRACKER_NAMES", "TRACKER_PRESETS", "TrackerConfig", "tracker_config"),
        "tphyolo.track.kalman": ("KalmanBoxFilter",),
        "tphyolo.track.matching": ("Matching", "match"),
        "tphyolo.track.tracker": ("Tracker", "Tracks"),
    },
)

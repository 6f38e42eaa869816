"""Multi-object-tracking files: one sequence's boxes in memory (`TrackTable`), the text formats of the
benchmarks (MOTChallenge, VisDrone-MOT, UAVDT), their folder layouts, one row per benchmark
(`tphyolo.data.mot.layouts.LAYOUTS`), and reading sets of sequences (`tphyolo.data.mot.sequences`).

Importing this package imports none of its modules; each name is imported from its module on first use.
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.data.mot.layouts": ("LAYOUTS", "TrackLayout", "get_layout"),
        "tphyolo.data.mot.motchallenge": ("format_mot", "read_mot", "write_mot"),
        "tphyolo.data.mot.sequences": (
            "TRACK_FORMATS",
            "GroundTruthSequence",
            "detection_files",
            "ground_truth_files",
            "read_detections",
            "read_ground_truth",
            "read_tracks",
            "read_tracker_output",
            "TrackingSplit",
            "tracking_split",
        ),
        "tphyolo.data.mot.table": ("TrackTable",),
        "tphyolo.data.mot.uavdt": ("read_uavdt",),
        "tphyolo.data.mot.visdrone_mot": ("format_visdrone_mot", "read_visdrone_mot", "write_visdrone_mot"),
    },
)

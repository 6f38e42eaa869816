"""Detection metrics: YOLO-style AP (training), confusion matrix, COCO and VisDrone challenge protocols, and the
protocol registry (`PROTOCOLS`) that `val` and `eval` score with.

Importing this package imports none of its modules (the command line reads the protocol names without numpy
or torch); each name is imported from its module on first use.
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.metrics.ap": (
            "IOU_THRESHOLDS",
            "APResult",
            "DetectionStats",
            "Summary",
            "ap_per_class",
            "compute_ap",
            "fitness",
            "match_predictions",
        ),
        "tphyolo.metrics.coco": (
            "CocoResult",
            "evaluate_coco",
        ),
        "tphyolo.metrics.confusion": ("ConfusionMatrix",),
        "tphyolo.metrics.ignored": ("in_ignored_regions",),
        "tphyolo.metrics.protocol": (
            "IgnoreRules",
            "ImageResult",
            "Protocol",
            "ProtocolResult",
        ),
        "tphyolo.metrics.registry": (
            "PROTOCOLS",
            "get_protocol",
        ),
        "tphyolo.metrics.visdrone": (
            "ImageAnnotations",
            "VisDroneResult",
            "evaluate_visdrone",
        ),
    },
)

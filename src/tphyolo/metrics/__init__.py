"""Detection metrics: YOLO-style AP (training), confusion matrix, COCO and VisDrone challenge protocols."""

from tphyolo.metrics.ap import (
    IOU_THRESHOLDS,
    APResult,
    DetectionStats,
    Summary,
    ap_per_class,
    compute_ap,
    fitness,
    match_predictions,
)
from tphyolo.metrics.confusion import ConfusionMatrix

__all__ = [
    "IOU_THRESHOLDS",
    "APResult",
    "ConfusionMatrix",
    "DetectionStats",
    "Summary",
    "ap_per_class",
    "compute_ap",
    "fitness",
    "match_predictions",
]

"""Detection metrics: YOLO-style AP (training), confusion matrix, COCO and VisDrone challenge protocols, and the
protocol registry (`PROTOCOLS`) that `val` and `eval` score with."""

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
from tphyolo.metrics.coco import CocoResult, evaluate_coco
from tphyolo.metrics.confusion import ConfusionMatrix
from tphyolo.metrics.protocol import ImageResult, Protocol, ProtocolResult
from tphyolo.metrics.registry import PROTOCOLS, get_protocol
from tphyolo.metrics.visdrone import ImageAnnotations, VisDroneResult, evaluate_visdrone

__all__ = [
    "IOU_THRESHOLDS",
    "PROTOCOLS",
    "APResult",
    "CocoResult",
    "ConfusionMatrix",
    "DetectionStats",
    "ImageAnnotations",
    "ImageResult",
    "Protocol",
    "ProtocolResult",
    "Summary",
    "VisDroneResult",
    "ap_per_class",
    "compute_ap",
    "evaluate_coco",
    "evaluate_visdrone",
    "fitness",
    "get_protocol",
    "match_predictions",
]

"""Box operations: conversions, overlaps, non-maximum suppression and merging, weighted boxes fusion, tiling;
`Detections`.

Importing this package imports none of its modules (most need torch; `tiling` does not, and the command line
reads its constants); each name is imported from its module on first use.
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.ops.boxes": (
            "BOX_FORMATS", "box_area", "box_convert", "box_iou", "clip_boxes", "cxcywh_to_xyxy", "unletterbox",
            "xywh_to_xyxy", "xyxy_to_cxcywh", "xyxy_to_xywh",
        ),
        "tphyolo.ops.detections": ("Detections",),
        "tphyolo.ops.nms": ("non_max_suppression",),
        "tphyolo.ops.wbf": ("weighted_boxes_fusion",),
    },
)  # fmt: skip

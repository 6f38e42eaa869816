"""Inference defaults shared by prediction, validation and training-time validation.

Named once here; every config field and flag that needs one refers to these constants.
"""

from __future__ import annotations

MAX_DET = 500  # detections kept per image: the VisDrone protocol scores up to 500
PREDICT_CONF = 0.25  # confidence threshold when predicting
PREDICT_IOU = 0.45  # NMS IoU threshold when predicting
VAL_CONF = 0.001  # confidence threshold when scoring (a full precision-recall curve)
VAL_IOU = 0.6  # NMS IoU threshold when scoring
WBF_IOU = 0.55  # the IoU threshold of weighted boxes fusion unless given

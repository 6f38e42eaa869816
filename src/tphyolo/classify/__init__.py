"""The self-trained crop classifier of TPH-YOLOv5: a small CNN trained on ground-truth crops cut from
original-resolution images, which re-labels a detector's boxes of classes it confuses.

    classifier = CropClassifier.load("runs/classify/exp/weights/best.pt", detector_names=predictor.names)
    boxes, scores, labels = reclassify(image, det.boxes, det.scores, det.labels, classifier)
"""

from tphyolo.classify.checkpoint import ClassifierCheckpoint, load_classifier, save_classifier
from tphyolo.classify.classifier import CropClassifier, resolve_class_ids
from tphyolo.classify.combine import combine_class_scores, one_hot_scores
from tphyolo.classify.config import ClassifyConfig
from tphyolo.classify.crops import context_regions, crop_objects, cut_crops, extract_crops, extract_patches
from tphyolo.classify.model import CropClassifierNet, build_classifier
from tphyolo.classify.relabel import reclassify, reclassify_rows

__all__ = [
    "ClassifierCheckpoint",
    "ClassifyConfig",
    "CropClassifier",
    "CropClassifierNet",
    "build_classifier",
    "combine_class_scores",
    "context_regions",
    "crop_objects",
    "cut_crops",
    "extract_crops",
    "extract_patches",
    "load_classifier",
    "one_hot_scores",
    "reclassify",
    "reclassify_rows",
    "resolve_class_ids",
    "save_classifier",
]

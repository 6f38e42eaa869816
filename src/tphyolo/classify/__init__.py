"""The self-trained crop classifier of TPH-YOLOv5: a small CNN trained on ground-truth crops cut from
original-resolution images, which re-labels a detector's boxes of classes it confuses.

    classifier = CropClassifier.load("runs/classify/exp/weights/best.pt", detector_names=predictor.names)
    boxes, scores, labels = reclassify(image, det.boxes, det.scores, det.labels, classifier)

Importing this package imports none of its modules; each name is imported from its module on first use.
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.classify.checkpoint": (
            "ClassifierCheckpoint",
            "load_classifier",
            "save_classifier",
        ),
        "tphyolo.classify.classifier": (
            "CropClassifier",
            "resolve_class_ids",
        ),
        "tphyolo.classify.combine": (
            "combine_class_scores",
            "one_hot_scores",
        ),
        "tphyolo.classify.config": ("ClassifyConfig",),
        "tphyolo.classify.crops": (
            "context_regions",
            "crop_objects",
            "cut_crops",
            "extract_crops",
            "extract_patches",
        ),
        "tphyolo.classify.model": (
            "CropClassifierNet",
            "build_classifier",
        ),
        "tphyolo.classify.relabel": (
            "reclassify",
            "reclassify_rows",
        ),
    },
)

"""The TPH-YOLOv5 family of detection models: layers, yaml parser, heads, the model and weight conversion.

model = build_model("tph-yolov5s", num_classes=10)
model.load_state_dict(convert_original_state_dict(original_state_dict, model))
"""

from tphyolo.models.build import build_model, builtin_model_names, load_model_config
from tphyolo.models.convert import convert_original_state_dict
from tphyolo.models.heads import Detect, DetectionHead
from tphyolo.models.model import DetectionModel

__all__ = [
    "Detect",
    "DetectionHead",
    "DetectionModel",
    "build_model",
    "builtin_model_names",
    "convert_original_state_dict",
    "load_model_config",
]

"""The TPH-YOLOv5 family of detection models: layers, yaml parser, heads, the model and weight conversion."""

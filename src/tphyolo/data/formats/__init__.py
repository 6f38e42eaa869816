"""On-disk label formats: VisDrone-DET annotations, YOLO txt (+ ignore side files), COCO json."""

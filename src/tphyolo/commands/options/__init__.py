"""Flags that several commands share: the inference flags of predict, val and track (`inference`), and the
YOLOv5 spellings of flags with their hints (`yolov5`), command lines spelled back from settings (`argv`).

Importing this package imports none of its modules; import them directly (`tphyolo.commands.options.detector`).
"""

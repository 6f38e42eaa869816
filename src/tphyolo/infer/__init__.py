"""The inference core: a `Detector` runs backends (PyTorch and every exported runtime, `infer.backends`) with
test-time augmentation and slicing, and merges their detections in original-image pixels.

Importing this package imports none of its modules; import them directly (`tphyolo.infer.detector`).
"""

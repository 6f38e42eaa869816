"""The model of a training run: building or restoring it, pretrained-weight transfer and anchors fitted to the
data.

Importing this package imports none of its modules; import them directly (`tphyolo.training.model.setup`).
"""

"""Training and inference machinery: loss, hyperparameters, anchors, training loop, evaluation, prediction.

Importing this package imports none of its modules; import them directly (`tphyolo.engine.loss`).
"""
